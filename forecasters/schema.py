"""Feature schemas of the three job kinds (DESIGN §4.1-4.3): names, dtypes and fixed level lists.

The names are the contract other engineers and operators' history files use. Category level
lists are fixed and versioned (:data:`LEVELS_VERSION`); a fitted model stores the lists it
was trained with, so predictions never depend on the category codes of an input frame.

Timing and target columns shared by every history (DESIGN §3):
``submitted_at``, ``started_at``, ``finished_at`` (UTC, timezone-aware), ``duration_h``
(hours, the duration target) and ``gpus_used`` (the power-of-two GPU count the job needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from domain import JOB_KINDS, JobKind
from domain.gpus import GPU_TABLE
from forecasters.errors import InputError

#: Version of every level list below; bump it when a list changes (models store it; a saved model
#: of another version is retrained before use). 2026.11-2: ``gpu_type`` covers every type of
#: :data:`domain.gpus.GPU_TABLE`.
LEVELS_VERSION = "2026.11-2"

TIMING_COLUMNS: tuple[str, ...] = ("submitted_at", "started_at", "finished_at")
TARGET_DURATION = "duration_h"
TARGET_GPUS = "gpus_used"
JOB_ID = "job_id"

#: GPU types the job generators draw (:mod:`forecasters.workloads`): the generated histories hold only these.
GENERATED_GPU_TYPES: tuple[str, ...] = ("a100_40gb", "a100_80gb", "h100_80gb", "h200_141gb", "l40s_48gb")
#: Level list of ``gpu_type``: the generated five first (their category codes unchanged since
#: 2026.11-1), then every other type of :data:`domain.gpus.GPU_TABLE` (P100, V100, T4, A10, B200,
#: MI300X). A model trained on the generated histories has never seen the others: its
#: physics features still price them from their datasheet figures, and its predictions flag
#: them (``gpu_type_outside_history``, :mod:`forecasters.jobs.model`).
GPU_TYPES: tuple[str, ...] = (*GENERATED_GPU_TYPES, *(g for g in GPU_TABLE if g not in GENERATED_GPU_TYPES))

TRAINING_VARIANTS: tuple[str, ...] = (
    "full_finetune",
    "lora",
    "qlora",
    "dora",
    "ia3",
    "prefix_tuning",
    "adapter",
    "continued_pretraining",
    "dpo",
    "ppo_rlhf",
)
TRAINING_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8", "nf4")
OPTIMIZERS: tuple[str, ...] = ("adamw", "adamw_8bit", "adafactor", "lion", "sgd")
QUANT_METHODS: tuple[str, ...] = ("gptq", "awq", "bnb_nf4", "smoothquant", "fp8", "gguf_k_quant", "hqq", "aqlm")
SERVING_PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8", "int4")
ENGINES: tuple[str, ...] = ("vllm", "sglang", "tensorrt_llm", "tgi", "hf_transformers")


@dataclass(frozen=True)
class KindSpec:
    """The feature contract of one job kind.

    Attributes:
        kind: ``training``, ``quantization`` or ``batch_inference``.
        features: every feature column, in model order (the contract names).
        categorical: column -> fixed level tuple (native LightGBM categoricals).
        integer: columns holding whole numbers (validated, stored as float64 for LightGBM).
        boolean: columns holding booleans (stored as float64 0/1).
        group_col: the column of the per-variant (per-method, per-engine) median baseline.
    """

    kind: str
    features: tuple[str, ...]
    categorical: dict[str, tuple[str, ...]]
    integer: tuple[str, ...]
    boolean: tuple[str, ...]
    group_col: str
    levels_version: str = LEVELS_VERSION
    numeric: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        numeric = tuple(c for c in self.features if c not in self.categorical)
        object.__setattr__(self, "numeric", numeric)
        missing = [c for c in (*self.categorical, *self.integer, *self.boolean) if c not in self.features]
        if missing:  # pragma: no cover - a programming error in this module
            raise AssertionError(f"{self.kind}: typed columns not in features: {missing}")


TRAINING = KindSpec(
    kind=JobKind.TRAINING.value,
    features=(
        "training_variant",
        "model_params_b",
        "num_layers",
        "hidden_size",
        "seq_len",
        "dataset_tokens_m",
        "dataset_examples",
        "epochs",
        "global_batch_size",
        "micro_batch_size",
        "grad_accum_steps",
        "lora_rank",
        "trainable_params_pct",
        "precision",
        "optimizer",
        "gpus_requested",
        "gpu_type",
        "gradient_checkpointing",
        "zero_stage",
        "tensor_parallel",
        "flash_attention",
        "sequence_packing",
    ),
    categorical={
        "training_variant": TRAINING_VARIANTS,
        "precision": TRAINING_PRECISIONS,
        "optimizer": OPTIMIZERS,
        "gpu_type": GPU_TYPES,
    },
    integer=(
        "num_layers",
        "hidden_size",
        "seq_len",
        "dataset_examples",
        "global_batch_size",
        "micro_batch_size",
        "grad_accum_steps",
        "lora_rank",
        "gpus_requested",
        "zero_stage",
        "tensor_parallel",
    ),
    boolean=("gradient_checkpointing", "flash_attention", "sequence_packing"),
    group_col="training_variant",
)

QUANTIZATION = KindSpec(
    kind=JobKind.QUANTIZATION.value,
    features=(
        "quant_method",
        "model_params_b",
        "num_layers",
        "hidden_size",
        "target_bits",
        "group_size",
        "calibration_samples",
        "calibration_seq_len",
        "act_order",
        "gpu_type",
        "gpus_requested",
    ),
    categorical={"quant_method": QUANT_METHODS, "gpu_type": GPU_TYPES},
    integer=(
        "num_layers",
        "hidden_size",
        "target_bits",
        "group_size",
        "calibration_samples",
        "calibration_seq_len",
        "gpus_requested",
    ),
    boolean=("act_order",),
    group_col="quant_method",
)

BATCH_INFERENCE = KindSpec(
    kind=JobKind.BATCH_INFERENCE.value,
    features=(
        "model_params_b",
        "precision",
        "num_requests",
        "mean_input_tokens",
        "mean_output_tokens",
        "engine",
        "max_batch_size",
        "gpu_type",
        "gpus_requested",
    ),
    categorical={"precision": SERVING_PRECISIONS, "engine": ENGINES, "gpu_type": GPU_TYPES},
    integer=("num_requests", "max_batch_size", "gpus_requested"),
    boolean=(),
    group_col="engine",
)

SPECS: dict[str, KindSpec] = {s.kind: s for s in (TRAINING, QUANTIZATION, BATCH_INFERENCE)}

#: Feature lists per kind (the public constants other engineers import).
TRAINING_FEATURES = TRAINING.features
QUANTIZATION_FEATURES = QUANTIZATION.features
BATCH_INFERENCE_FEATURES = BATCH_INFERENCE.features


def spec_for(kind: str) -> KindSpec:
    """Return the :class:`KindSpec` of ``kind``.

    Raises:
        forecasters.errors.InputError: for an unknown kind (names the known kinds).
    """
    try:
        return SPECS[kind]
    except KeyError:
        raise InputError(f"unknown job kind {kind!r}; known: {', '.join(JOB_KINDS)}") from None
