# plant MICROSECONDS: commit a host-side wait of that many microseconds before every Conv2d and Linear forward of the
# models the checkout builds (a forward pre-hook on the instances, so it lives in the head's model code, not in
# torch, which both sides of a process share). Sourced by run.sh and defaults.sh; `git revert HEAD` removes it.
plant() {
cat >> perfsuite/workloads/random_weights.py <<PLANT


import time as _time

_unplanted_build_on_meta = build_on_meta


def _planted_wait(module, args):
    end_s = _time.perf_counter() + ${1}e-6
    while _time.perf_counter() < end_s:
        pass


def build_on_meta(factory):  # noqa: F811
    module = _unplanted_build_on_meta(factory)
    for child in module.modules():
        if isinstance(child, (torch.nn.Conv2d, torch.nn.Linear)):
            child.register_forward_pre_hook(_planted_wait)
    return module
PLANT
git -c user.email=ci@example.com -c user.name=ci commit -qam "planted ${1} us"
}
