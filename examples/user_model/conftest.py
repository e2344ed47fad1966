import torch
import torch.nn.functional as F

from perfsuite import Workload, register_workload

register_workload(Workload(
    name="tiny-mlp",
    build_module=lambda profile: torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
    ),
    make_inputs=lambda profile, batch_size: torch.randn(batch_size, 64),
    make_target=lambda profile, batch_size: torch.randint(0, 10, (batch_size,)),
    loss=lambda logits, labels: F.cross_entropy(logits.float(), labels),
    batch_sizes={"smoke": (8,), "standard": (256,), "full": (4096,)},
))
