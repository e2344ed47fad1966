"""Stable Diffusion 1.5, as in the source article's generation benchmark.

Four workloads from the same components, each with random weights built from its config:
- `sd15-unet`: one denoising step of the UNet on 64x64 latents (a 512x512 image), train and infer;
- `sd15-text2img`: the 5-step text-to-image pipeline (the article's "SD 1.5, 5 steps"): CLIP text encoder
  on random token ids, 5 DDIM steps with classifier-free guidance (10 UNet evaluations), VAE decode;
- `sd15-vae-decode` and `sd15-text-encoder`: the pipeline's other two models on their own.

No tokenizer is needed: the pipeline is fed `prompt_embeds` made by the text encoder inside the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from perfsuite.workloads import Workload
from perfsuite.workloads.random_weights import build_on_meta

if TYPE_CHECKING:
    from transformers import CLIPTextConfig

DENOISING_STEPS = 5
GUIDANCE_SCALE = 7.5
TEXT_TOKENS = 77


def unet_config(profile: str) -> dict:
    """UNet2DConditionModel keyword arguments: SD 1.5's (blocks 320-640-1280-1280, cross-attention 768)."""
    if profile == "smoke":
        return dict(
            sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32, attention_head_dim=4, norm_num_groups=8,
        )
    return dict(
        sample_size=64, in_channels=4, out_channels=4, layers_per_block=2,
        block_out_channels=(320, 640, 1280, 1280),
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=768, attention_head_dim=8, norm_num_groups=32,
    )


def vae_config(profile: str) -> dict:
    """AutoencoderKL keyword arguments: SD 1.5's (blocks 128-256-512-512, 4 latent channels)."""
    if profile == "smoke":
        return dict(
            in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1, block_out_channels=(16, 32),
            down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
            norm_num_groups=8, sample_size=32,
        )
    return dict(
        in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2,
        block_out_channels=(128, 256, 512, 512),
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        norm_num_groups=32, sample_size=512,
    )


def text_encoder_config(profile: str) -> CLIPTextConfig:
    """CLIPTextConfig of SD 1.5's text encoder (CLIP ViT-L/14: hidden 768, 12 layers, quick_gelu).

    `CLIPTextConfig()`'s defaults (hidden 512) do not fit the SD 1.5 UNet's cross-attention width.
    """
    from transformers import CLIPTextConfig

    if profile == "smoke":
        return CLIPTextConfig(
            vocab_size=1000, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            max_position_embeddings=TEXT_TOKENS, projection_dim=32, hidden_act="quick_gelu",
            bos_token_id=998, eos_token_id=999,
        )
    return CLIPTextConfig(
        vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
        max_position_embeddings=TEXT_TOKENS, projection_dim=768, hidden_act="quick_gelu",
    )


def latent_size(profile: str) -> int:
    """Side of the square latent: 64 (a 512x512 image) for SD 1.5, 16 at smoke size."""
    return unet_config(profile)["sample_size"]


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class UNetNoisePrediction(torch.nn.Module):
    """UNet2DConditionModel returning the predicted noise tensor only."""

    def __init__(self, profile: str):
        super().__init__()
        # From its own module: diffusers' top-level names are typed as placeholder classes without methods.
        from diffusers.models.unets.unet_2d_condition import UNet2DConditionModel

        self.unet = UNet2DConditionModel(**unet_config(profile))

    def forward(self, sample, timestep, encoder_hidden_states):
        return self.unet(sample, timestep, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]


def build_unet(profile: str) -> torch.nn.Module:
    """The SD 1.5 UNet (or its smoke-size twin) with random weights."""
    return build_on_meta(lambda: UNetNoisePrediction(profile))


def make_unet_inputs(profile: str, batch_size: int) -> dict[str, torch.Tensor]:
    """Noisy latents, a timestep per sample and text embeddings, as one training step of SD 1.5 sees them."""
    side = latent_size(profile)
    width = unet_config(profile)["cross_attention_dim"]
    return {
        "sample": torch.randn(batch_size, 4, side, side, generator=_generator(1)),
        "timestep": torch.randint(0, 1000, (batch_size,), generator=_generator(2)),
        "encoder_hidden_states": torch.randn(batch_size, TEXT_TOKENS, width, generator=_generator(3)),
    }


def make_noise_target(profile: str, batch_size: int) -> torch.Tensor:
    """The noise the UNet is trained to predict."""
    side = latent_size(profile)
    return torch.randn(batch_size, 4, side, side, generator=_generator(4))


def noise_mse(predicted: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Epsilon-prediction loss of SD 1.5 training, in float32."""
    return F.mse_loss(predicted.float(), noise)


def enable_unet_checkpointing(module: torch.nn.Module) -> None:
    """Gradient checkpointing of the UNet's blocks (diffusers' switch), on a `build_unet` module."""
    if not isinstance(module, UNetNoisePrediction):
        raise TypeError(f"sd15-unet checkpointing needs the module `build_unet` returns, got {type(module).__name__}")
    module.unet.enable_gradient_checkpointing()


class TextEncoderHiddenStates(torch.nn.Module):
    """CLIPTextModel returning its last hidden state, which is what SD 1.5 feeds the UNet."""

    def __init__(self, profile: str):
        super().__init__()
        from transformers import CLIPTextModel

        self.text_encoder = CLIPTextModel(text_encoder_config(profile))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.text_encoder(input_ids=input_ids).last_hidden_state


def make_token_ids(profile: str, batch_size: int) -> torch.Tensor:
    """Random token ids of the text encoder's full 77-token context."""
    vocab = text_encoder_config(profile).vocab_size
    return torch.randint(0, vocab, (batch_size, TEXT_TOKENS), generator=_generator(5))


class VaeDecode(torch.nn.Module):
    """AutoencoderKL's decoder: latents to an image."""

    def __init__(self, profile: str):
        super().__init__()
        # From its own module: diffusers' top-level names are typed as placeholder classes without methods.
        from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKL

        self.vae = AutoencoderKL(**vae_config(profile))

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(latents, return_dict=False)[0]


def make_latents(profile: str, batch_size: int) -> torch.Tensor:
    """Random latents of the size the UNet works on."""
    side = latent_size(profile)
    return torch.randn(batch_size, 4, side, side, generator=_generator(6))


class TextToImage(torch.nn.Module):
    """The SD 1.5 text-to-image pipeline, assembled from random components, as one module.

    forward(input_ids) encodes the prompt and an empty negative prompt (random ids both), runs the
    denoising loop with classifier-free guidance and decodes the latents to images (N, 3, H, W).
    """

    def __init__(self, profile: str):
        super().__init__()
        from diffusers import DDIMScheduler
        from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKL
        from diffusers.models.unets.unet_2d_condition import UNet2DConditionModel
        from transformers import CLIPTextModel

        self.profile = profile
        self.text_encoder = CLIPTextModel(text_encoder_config(profile))
        self.unet = UNet2DConditionModel(**unet_config(profile))
        self.vae = AutoencoderKL(**vae_config(profile))
        # SD 1.5's noise schedule; DDIM takes exactly one UNet evaluation per step (PNDM takes one more).
        self.scheduler = DDIMScheduler(
            beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
            set_alpha_to_one=False, steps_offset=1,
        )

    def pipeline(self):
        from diffusers import StableDiffusionPipeline

        pipe = StableDiffusionPipeline(
            vae=self.vae, text_encoder=self.text_encoder, tokenizer=None, unet=self.unet,
            scheduler=self.scheduler, safety_checker=None, feature_extractor=None, requires_safety_checker=False,
        )
        # mypy reads `diffusers.StableDiffusionPipeline` as the placeholder diffusers exports when torch or
        # transformers is missing, which lacks DiffusionPipeline's methods; at runtime it is the real pipeline.
        pipe.set_progress_bar_config(disable=True)  # type: ignore[attr-defined]
        return pipe

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        prompt_embeds = self.text_encoder(input_ids=input_ids).last_hidden_state
        negative_embeds = self.text_encoder(input_ids=torch.zeros_like(input_ids)).last_hidden_state
        side_px = latent_size(self.profile) * self.pipeline().vae_scale_factor
        generator = torch.Generator(device=input_ids.device).manual_seed(0)
        return self.pipeline()(
            prompt_embeds=prompt_embeds, negative_prompt_embeds=negative_embeds,
            num_inference_steps=DENOISING_STEPS, guidance_scale=GUIDANCE_SCALE, height=side_px, width=side_px,
            generator=generator, output_type="pt", return_dict=False,
        )[0]


WORKLOADS = (
    Workload(
        name="sd15-unet",
        build_module=build_unet,
        make_inputs=make_unet_inputs,
        make_target=make_noise_target,
        loss=noise_mse,
        batch_sizes={"smoke": (1,), "standard": (1, 2, 4), "full": (8, 16)},
        description="Stable Diffusion 1.5 UNet, one denoising step on 64x64 latents (diffusers UNet2DConditionModel)",
        enable_checkpointing=enable_unet_checkpointing,
        supports_channels_last=True,
        trains_convolutions=True,
    ),
    Workload(
        name="sd15-text2img",
        build_module=lambda profile: build_on_meta(lambda: TextToImage(profile)),
        make_inputs=make_token_ids,
        batch_sizes={"smoke": (1,), "standard": (1,), "full": (4,)},
        description="Stable Diffusion 1.5 text-to-image, 5 DDIM steps with guidance, 512x512 (diffusers pipeline)",
        extra_facts={"denoising_steps": DENOISING_STEPS, "unet_evaluations": 2 * DENOISING_STEPS},
        host_loop=True,
    ),
    Workload(
        name="sd15-vae-decode",
        build_module=lambda profile: build_on_meta(lambda: VaeDecode(profile)),
        make_inputs=make_latents,
        batch_sizes={"smoke": (1,), "standard": (1,), "full": (4,)},
        description="Stable Diffusion 1.5 VAE decoder, 64x64 latents to a 512x512 image (diffusers AutoencoderKL)",
    ),
    Workload(
        name="sd15-text-encoder",
        build_module=lambda profile: build_on_meta(lambda: TextEncoderHiddenStates(profile)),
        make_inputs=make_token_ids,
        batch_sizes={"smoke": (1,), "standard": (1, 8), "full": (32,)},
        description="Stable Diffusion 1.5 CLIP text encoder, 77 tokens (transformers CLIPTextModel)",
    ),
)
