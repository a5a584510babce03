//! Built-in presets: model architectures and GPUs shipped as TOML data in `presets/` and embedded
//! into the binary, so a preset is parsed by exactly the same code as a user's file.

use std::sync::Arc;

use crate::hardware::GpuSpec;
use crate::model::ModelSpec;
use crate::plan::{Engine, PlanSpec};
use crate::stack::{Stack, StackSpec, merge_inherited};

/// One embedded preset file.
#[derive(Debug, Clone, Copy)]
pub struct PresetFile {
    /// The name used on the command line.
    pub name: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

macro_rules! presets {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(PresetFile { name: $name, text: include_str!(concat!("../presets/", $dir, "/", $name, ".toml")) }),*]
    };
}

/// Every built-in model preset.
pub const MODELS: &[PresetFile] = presets!("models":
    "bloom-176b",
    "deepseek-v3",
    "falcon-h1-0.5b",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "gpt3-175b",
    "jamba-1.5-large",
    "jamba-v0.1",
    "kimi-k2",
    "llama2-13b",
    "llama2-70b",
    "llama2-7b",
    "llama3-70b",
    "llama3-8b",
    "llama3.1-405b",
    "llama3.1-70b",
    "llama3.1-8b",
    "megatron-gpt-1.7b",
    "megatron-gpt-145.6b",
    "megatron-gpt-18.4b",
    "megatron-gpt-1t",
    "megatron-gpt-3.6b",
    "megatron-gpt-310.1b",
    "megatron-gpt-39.1b",
    "megatron-gpt-529.6b",
    "megatron-gpt-7.5b",
    "megatron-gpt-76.1b",
    "minimax-text-01",
    "mixtral-8x22b",
    "mixtral-8x7b",
    "mpt-125m",
    "mpt-13b",
    "mpt-1b",
    "mpt-30b",
    "mpt-350m",
    "mpt-3b",
    "mpt-70b",
    "mpt-760m",
    "mpt-7b",
    "nemotron-3-nano",
    "nemotron-3-super",
    "nemotron-3-ultra",
    "nemotron-3.5-lightning",
    "nemotron4-15b",
    "nemotron4-340b",
    "nemotronh-56b",
    "nemotronh-8b",
    "qwen3-235b-a22b",
    "qwen3-30b-a3b",
    "qwen3-next-80b-a3b",
);

/// Every built-in GPU preset.
pub const GPUS: &[PresetFile] = presets!("gpus":
    "a100-40gb",
    "a100-80gb",
    "a800",
    "b200",
    "b300",
    "gb200",
    "gb300",
    "h100-96gb",
    "h100-sxm",
    "h200",
    "h800",
    "mi300x",
    "v100-sxm2",
    "v100-sxm3",
);

/// Every built-in software stack.
pub const STACKS: &[PresetFile] = presets!("stacks":
    "deepspeed",
    "generic",
    "llm-foundry",
    "megatron-core-0.12-0.13",
    "megatron-core-0.14-plus",
    "megatron-core-0.6",
    "megatron-core-0.8-0.11",
    "megatron-deepspeed",
    "megatron-deepspeed-2024-01",
    "megatron-lm-2020-2022",
    "nemo-24.07-25.07",
    "nemo-25.07",
    "nemo-25.09",
    "nemo-25.11",
    "nemo-26.02",
    "nemo-26.02.01",
    "nemo-26.04",
    "nemo-26.04.01",
    "nemo-26.06",
    "nemo-26.06.01",
    "nemo-26.08",
    "nemo-automodel",
    "torchtitan-0.2",
    "torchtitan-2024-12",
);

/// The stack a run uses when neither it nor its engine names one more precisely: unlisted
/// software, priced as a tuned published benchmark would run.
pub const GENERIC_STACK: &str = "generic";

/// The stack each engine's plans are priced with unless `--stack` names another release: the
/// newest one meshplan has read.
pub fn default_stack_id(engine: Engine) -> &'static str {
    match engine {
        Engine::Megatron => "megatron-core-0.14-plus",
        Engine::Torchtitan => "torchtitan-0.2",
        Engine::Deepspeed => "deepspeed",
    }
}

/// The id of the stack a plan runs on: the one it names, else its engine's default.
pub fn plan_stack_id(plan: &PlanSpec) -> String {
    plan.stack
        .clone()
        .unwrap_or_else(|| default_stack_id(plan.engine.unwrap_or(Engine::DEFAULT)).to_owned())
}

/// Why a preset could not be produced.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PresetError {
    /// No preset has that name.
    #[error("unknown {kind} preset `{name}`; known: {known}")]
    Unknown {
        /// `model`, `gpu` or `stack`.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
    },
    /// The embedded file does not parse (a bug in the shipped data, caught by the tests).
    #[error("built-in {kind} preset `{name}` is malformed: {message}")]
    Malformed {
        /// `model` or `gpu`.
        kind: &'static str,
        /// The preset's name.
        name: String,
        /// The parser's message.
        message: String,
    },
}

fn find<'a>(
    list: &'a [PresetFile],
    kind: &'static str,
    name: &str,
) -> Result<&'a PresetFile, PresetError> {
    let wanted = name.trim().to_ascii_lowercase();
    list.iter().find(|p| p.name == wanted).ok_or_else(|| PresetError::Unknown {
        kind,
        name: name.to_owned(),
        known: list.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
    })
}

/// Common short names of GPUs and the preset each means: the part a bare name usually refers to
/// (the SXM board of the H100, the 80 GB A100).
const GPU_ALIASES: [(&str, &str); 6] = [
    ("h100", "h100-sxm"),
    ("h100-80gb", "h100-sxm"),
    ("h100-sxm5", "h100-sxm"),
    ("a100", "a100-80gb"),
    ("v100", "v100-sxm2"),
    ("h200-sxm", "h200"),
];

/// Every built-in document length distribution (`--lengths NAME`).
pub const LENGTHS: &[PresetFile] = presets!("lengths": "wikipedia");

/// The length distribution preset of that name: a data spec with its source and lengths.
pub fn lengths(name: &str) -> Result<crate::data::DataSpec, PresetError> {
    let file = find(LENGTHS, "length distribution", name)?;
    toml::from_str(file.text).map_err(|err| malformed("length distribution", file.name, err))
}

/// The preset a short GPU name means, if it is one of [`GPU_ALIASES`].
fn gpu_alias(name: &str) -> Option<&'static str> {
    let wanted = name.trim().to_ascii_lowercase();
    GPU_ALIASES.iter().find(|(alias, _)| *alias == wanted).map(|(_, preset)| *preset)
}

/// The model preset of that name.
pub fn model(name: &str) -> Result<ModelSpec, PresetError> {
    let file = find(MODELS, "model", name)?;
    toml::from_str(file.text).map_err(|err| PresetError::Malformed {
        kind: "model",
        name: file.name.to_owned(),
        message: err.to_string(),
    })
}

/// The GPU preset of that name.
pub fn gpu(name: &str) -> Result<GpuSpec, PresetError> {
    let file = find(GPUS, "gpu", gpu_alias(name).unwrap_or(name))?;
    toml::from_str(file.text).map_err(|err| PresetError::Malformed {
        kind: "gpu",
        name: file.name.to_owned(),
        message: err.to_string(),
    })
}

fn malformed(kind: &'static str, name: &str, message: impl ToString) -> PresetError {
    PresetError::Malformed { kind, name: name.to_owned(), message: message.to_string() }
}

/// The stack preset of that name, merged with the presets it inherits from.
pub fn stack_spec(name: &str) -> Result<StackSpec, PresetError> {
    let mut chain = Vec::new();
    let mut next = Some(name.trim().to_ascii_lowercase());
    while let Some(id) = next {
        if chain.len() >= crate::stack::MAX_INHERITANCE_DEPTH {
            return Err(malformed("stack", name, "its `inherits` chain does not end"));
        }
        let file = find(STACKS, "stack", &id)?;
        let table: toml::Table =
            toml::from_str(file.text).map_err(|e| malformed("stack", file.name, e))?;
        // Each file on its own is a whole stack file too: unknown keys are rejected here.
        toml::from_str::<StackSpec>(file.text).map_err(|e| malformed("stack", file.name, e))?;
        next = table
            .get("stack")
            .and_then(|stack| stack.get("inherits"))
            .and_then(|parent| parent.as_str())
            .map(str::to_owned);
        chain.push(table);
    }
    let mut merged = toml::Table::new();
    for table in chain.iter().rev() {
        merged = merge_inherited(&merged, table);
    }
    toml::Value::Table(merged).try_into().map_err(|e| malformed("stack", name, e))
}

/// The stack preset of that name, validated.
pub fn stack(name: &str) -> Result<Stack, PresetError> {
    let spec = stack_spec(name)?;
    Stack::from_spec(&spec).map_err(|problems| malformed("stack", name, problems))
}

/// Every built-in stack, parsed once: the lookup for runs that name their software in words.
#[derive(Debug, Clone)]
pub struct StackCatalog {
    stacks: Vec<(Arc<Stack>, Vec<String>)>,
}

impl StackCatalog {
    /// Parses and validates every built-in stack.
    pub fn builtin() -> Result<StackCatalog, PresetError> {
        let stacks = STACKS
            .iter()
            .map(|file| {
                let spec = stack_spec(file.name)?;
                let matches = spec.stack.matches.iter().map(|m| m.to_ascii_lowercase()).collect();
                let stack = Stack::from_spec(&spec)
                    .map_err(|problems| malformed("stack", file.name, problems))?;
                Ok((Arc::new(stack), matches))
            })
            .collect::<Result<_, PresetError>>()?;
        Ok(StackCatalog { stacks })
    }

    /// The stack of that id.
    pub fn get(&self, id: &str) -> Option<&Arc<Stack>> {
        self.stacks.iter().find(|(stack, _)| stack.id() == id).map(|(stack, _)| stack)
    }

    /// Every stack, in file order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Stack>> {
        self.stacks.iter().map(|(stack, _)| stack)
    }

    /// The stack a software description names (`"NeMo 26.04 container (Megatron-Bridge +
    /// Megatron-Core)"`): of the stacks' `matches` texts found in it, case-insensitively, the
    /// one that starts first (the product the text names first), the longest of those; the
    /// generic stack when none is found.
    pub fn for_software(&self, text: &str) -> &Arc<Stack> {
        self.named_in(text).unwrap_or_else(|| self.generic())
    }

    /// The stack of a run described in two texts: the software it names (`"FlagPerf (repo HEAD
    /// 1b5a0303); framework per README"`) and its settings (`"DeepSpeed 0.11.1, HF Llama-2-7B"`).
    /// The software text decides where it names a stack; where it names none (a benchmark
    /// harness, an in-house trainer), the settings text may; else the generic stack.
    pub fn for_software_or_settings(&self, software: &str, settings: &str) -> &Arc<Stack> {
        self.named_in(software)
            .or_else(|| self.named_in(settings))
            .unwrap_or_else(|| self.generic())
    }

    fn named_in(&self, text: &str) -> Option<&Arc<Stack>> {
        let text = text.to_ascii_lowercase();
        self.stacks
            .iter()
            .flat_map(|(stack, matches)| matches.iter().map(move |m| (stack, m)))
            .filter(|(_, m)| !m.is_empty())
            .filter_map(|(stack, m)| text.find(m.as_str()).map(|at| (stack, at, m.len())))
            .min_by_key(|&(_, at, len)| (at, std::cmp::Reverse(len)))
            .map(|(stack, _, _)| stack)
    }

    fn generic(&self) -> &Arc<Stack> {
        self.get(GENERIC_STACK).unwrap_or(&self.stacks[0].0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::{Cluster, ClusterSpec, Gpu};
    use crate::model::Model;

    #[test]
    fn every_model_preset_parses_validates_and_is_named_after_its_file() {
        for file in MODELS {
            let spec = model(file.name).unwrap();
            assert_eq!(spec.name, file.name);
            assert!(spec.source.is_some(), "{} has no source", file.name);
            Model::from_spec(&spec).unwrap();
        }
    }

    #[test]
    fn every_gpu_preset_parses_validates_and_is_named_after_its_file() {
        for file in GPUS {
            let spec = gpu(file.name).unwrap();
            assert_eq!(spec.name, file.name);
            assert!(spec.source.is_some(), "{} has no source", file.name);
            Cluster::from_spec(&ClusterSpec { gpu: spec, num_gpus: 8 }).unwrap();
        }
    }

    #[test]
    fn every_stack_preset_validates_is_named_after_its_file_and_no_two_share_a_match() {
        let catalog = StackCatalog::builtin().unwrap();
        let mut seen = std::collections::BTreeMap::new();
        for file in STACKS {
            let spec = stack_spec(file.name).unwrap();
            assert_eq!(spec.stack.id, file.name);
            for text in &spec.stack.matches {
                let earlier = seen.insert(text.to_ascii_lowercase(), file.name);
                assert!(earlier.is_none(), "`{text}` matches {earlier:?} and {}", file.name);
                assert_eq!(catalog.for_software(text).id(), file.name, "{text}");
            }
        }
        for engine in Engine::ALL {
            let stack = catalog.get(default_stack_id(engine)).unwrap();
            assert_eq!(stack.engine(), Some(engine));
        }
    }

    #[test]
    fn every_recipe_names_gpu_presets() {
        let catalog = StackCatalog::builtin().unwrap();
        for file in STACKS {
            let stack = catalog.get(file.name).unwrap();
            for recipe in stack.recipes() {
                for gpu in recipe.gpus() {
                    assert!(GPUS.iter().any(|p| p.name == gpu), "{}: {gpu}", file.name);
                }
            }
        }
    }

    #[test]
    fn built_in_recipes_match_cells_of_the_recipe_tables() {
        use crate::plan::{ExpertDispatch, Precision, RecomputeKind, RecomputeModule};
        use crate::stack::{CudaGraphImpl, CudaGraphModule, FlexBackend};
        let catalog = StackCatalog::builtin().unwrap();
        let at = |id: &str, model: &str, gpu: &str, precision: Precision| {
            catalog
                .get(id)
                .unwrap()
                .recipe_for(model, gpu, precision, 64)
                .map(|r| r.settings().clone())
        };
        // docs/stack-recipes.md section 5, LLAMA3_70B GB200 FP8_CS: act offload 40L; Megatron-FSDP.
        let llama = at("nemo-25.11", "LLAMA3_70B", "gb200", Precision::Fp8Current).unwrap();
        assert_eq!(llama.offload_activation_layers, Some(40));
        assert_eq!(llama.fsdp, Some(true));
        assert_eq!(llama.cuda_graphs, Some(CudaGraphImpl::None));
        // LLAMA31_405B GB300 FP8_CS: offload 10L in 25.11, no CG only from 26.02 on.
        let old = at("nemo-25.11", "LLAMA3.1_405B", "gb300", Precision::Fp8Current).unwrap();
        assert_eq!(old.offload_activation_layers, Some(10));
        let new = at("nemo-26.02", "Llama 3.1 405B", "gb300", Precision::Fp8Current).unwrap();
        assert_eq!((new.offload_activation_layers, new.fsdp), (None, None));
        // DEEPSEEK_V3 H100 BF16 25.11: recompute sel mla_up_proj+mlp; flex/deepep; EP a2a overlap.
        let deepseek =
            at("nemo-25.11", "DeepSeekV3 (dropless)", "h100-sxm", Precision::Bf16).unwrap();
        assert_eq!(deepseek.recompute, Some(RecomputeKind::Selective));
        assert_eq!(
            deepseek.recompute_modules.as_deref(),
            Some(&[RecomputeModule::MlaUpProj, RecomputeModule::Mlp][..])
        );
        assert_eq!(deepseek.expert_dispatch, Some(ExpertDispatch::Deduplicated));
        assert_eq!(deepseek.flex_backend, Some(FlexBackend::Deepep));
        assert_eq!(deepseek.expert_comm_overlap, Some(true));
        // QWEN3_30B_A3B GB300 BF16 26.06.01: CG transformer_engine [moe_router, moe_preprocess].
        let qwen = at("nemo-26.06.01", "Qwen3_30B_a3B", "gb300", Precision::Bf16).unwrap();
        assert_eq!(
            qwen.cuda_graph_scope,
            [CudaGraphModule::MoeRouter, CudaGraphModule::MoePreprocess]
        );
        assert_eq!(qwen.recompute, Some(RecomputeKind::None));
        // LLAMA3_8B H100 FP8_CS: full block 5 up to 26.06.01, no CG only in 26.08.
        let full = at("nemo-26.06.01", "LLAMA3_8B", "h100-sxm", Precision::Fp8Current).unwrap();
        assert_eq!(
            (full.recompute, full.recompute_num_layers),
            (Some(RecomputeKind::Full), Some(5))
        );
        let later = at("nemo-26.08", "LLAMA3_8B", "h100-sxm", Precision::Fp8Current).unwrap();
        assert_eq!(later.recompute, None);
        // "—": GPT_OSS_120B H100 FP8_MX has a recipe in 26.04 only; KIMI_K2 from 26.02.01.
        assert!(at("nemo-26.04", "GPT OSS 120B", "h100-sxm", Precision::Mxfp8).is_some());
        assert!(at("nemo-26.04.01", "GPT OSS 120B", "h100-sxm", Precision::Mxfp8).is_none());
        assert!(at("nemo-26.02", "Kimi_K2", "gb300", Precision::Mxfp8).is_none());
        assert!(at("nemo-26.02.01", "Kimi_K2", "gb300", Precision::Mxfp8).is_some());
        // B300 rows: QWEN3_235B_A22B B300 FP8_MX 26.02 is "no CG; EP a2a overlap" (all-to-all);
        // GPT_OSS_120B B300 BF16 26.04 "CG transformer_engine [attn, moe_router, moe_preprocess];
        // flex/hybridep"; KIMI_K2 has no B300 row.
        let qwen = at("nemo-26.02", "Qwen3_235B_a22B", "b300", Precision::Mxfp8).unwrap();
        assert_eq!(qwen.cuda_graphs, Some(CudaGraphImpl::None));
        assert_eq!(qwen.expert_dispatch, Some(ExpertDispatch::AllToAll));
        assert_eq!(qwen.expert_comm_overlap, Some(true));
        let oss = at("nemo-26.04", "GPT OSS 120B", "b300", Precision::Bf16).unwrap();
        assert_eq!(oss.cuda_graphs, Some(CudaGraphImpl::TransformerEngine));
        assert_eq!(
            oss.cuda_graph_scope,
            [CudaGraphModule::Attn, CudaGraphModule::MoeRouter, CudaGraphModule::MoePreprocess]
        );
        assert_eq!(oss.flex_backend, Some(FlexBackend::Hybridep));
        assert!(at("nemo-26.06", "Kimi_K2", "b300", Precision::Mxfp8).is_none());
        // QWEN3_235B_A22B B200 26.02.01 (footnote 1): the base config names DeepEP, the run uses
        // the all-to-all dispatcher.
        let b200 = at("nemo-26.02.01", "Qwen3_235B_a22B", "b200", Precision::Mxfp8).unwrap();
        assert_eq!(
            (b200.expert_dispatch, b200.flex_backend),
            (Some(ExpertDispatch::AllToAll), None)
        );
        // No recipe for the generic stack.
        assert!(at("generic", "LLAMA3_70B", "gb200", Precision::Bf16).is_none());
    }

    #[test]
    fn software_text_picks_the_longest_matching_stack_and_unknown_text_the_generic_one() {
        let catalog = StackCatalog::builtin().unwrap();
        let of = |text: &str| catalog.for_software(text).id().to_owned();
        assert_eq!(
            of("NeMo 26.04.01 container (Megatron-Bridge + Megatron-Core)"),
            "nemo-26.04.01"
        );
        assert_eq!(of("NeMo 26.04 container (Megatron-Bridge + Megatron-Core)"), "nemo-26.04");
        assert_eq!(
            of("Megatron-DeepSpeed (BigScience fork) + DeepSpeed BF16Optimizer"),
            "megatron-deepspeed"
        );
        assert_eq!(of("NeMo AutoModel main (2025-10)"), "nemo-automodel");
        assert_eq!(of("Megatron-LM (2021), NGC PyTorch 20.12 container"), "megatron-lm-2020-2022");
        assert_eq!(of("metaseq (FairScale FSDP + Megatron-LM tensor parallelism)"), GENERIC_STACK);
        assert_eq!(of("our in-house trainer"), GENERIC_STACK);
    }

    #[test]
    fn a_run_that_names_only_a_harness_takes_the_stack_its_settings_name() {
        let catalog = StackCatalog::builtin().unwrap();
        let of = |software: &str, settings: &str| {
            catalog.for_software_or_settings(software, settings).id().to_owned()
        };
        let flagperf = "FlagPerf (repo HEAD 1b5a0303, 2025-11); framework per README";
        assert_eq!(of(flagperf, "DeepSpeed 0.11.1, HF Llama-2-7B, flash-attn"), "deepspeed");
        assert_eq!(
            of(flagperf, "Megatron-DeepSpeed @11f2d9342, DeepSpeed 0.11.0, flash-attn 2"),
            "megatron-deepspeed-2024-01"
        );
        assert_eq!(
            of(flagperf, "Megatron-LM core_v0.6.0 (TE impl, --sequence-parallel)"),
            "megatron-core-0.6"
        );
        assert_eq!(of(flagperf, "FlagScale (Megatron-LM fork) @26cd664; SP"), GENERIC_STACK);
        assert_eq!(of(flagperf, "local batch size 2"), GENERIC_STACK);
        // The software text decides wherever it names a stack.
        assert_eq!(of("NeMo 25.09 container", "DeepSpeed-style ZeRO-1"), "nemo-25.09");
    }

    #[test]
    fn preset_lists_are_sorted_and_unique() {
        for list in [MODELS, GPUS, STACKS] {
            for pair in list.windows(2) {
                let (first, second) = (pair[0].name, pair[1].name);
                assert!(
                    first < second,
                    "`{first}` then `{second}`: keep the list sorted and unique"
                );
            }
        }
    }

    fn preset_model(name: &str) -> Model {
        Model::from_spec(&model(name).unwrap()).unwrap()
    }

    /// The total as model cards state it: without multi-token-prediction modules.
    fn total_params(name: &str) -> f64 {
        preset_model(name).params_without_mtp() as f64
    }

    #[test]
    fn model_presets_match_published_parameter_totals() {
        let published: &[(&str, f64)] = &[
            ("llama2-7b", 6.74e9),
            ("llama2-13b", 13.02e9),
            ("llama2-70b", 68.98e9),
            ("llama3-8b", 8.03e9),
            ("llama3-70b", 70.55e9),
            ("llama3.1-8b", 8.03e9),
            ("llama3.1-70b", 70.55e9),
            ("llama3.1-405b", 405.85e9),
            // "175B"; 174.6B is the count with GPT-2's 50257-token vocabulary and 2048 positions.
            ("gpt3-175b", 174.6e9),
            // MosaicML's 6.7B is the released checkpoint (ALiBi, no biases, 6.649B); the preset is the
            // benchmarked configuration with learned positions and biases (6.659B), see its source.
            ("mpt-7b", 6.7e9),
            // The card's 176.247B also counts the vocabulary padded to 250880 and the embedding
            // LayerNorm, which the preset leaves out (2.9M parameters, 0.002%).
            ("bloom-176b", 176.2e9),
            // 12.5B non-embedding + 3.2B embedding (Nemotron-4 15B report).
            ("nemotron4-15b", 15.7e9),
            ("nemotron4-340b", 341e9),
            // Mixture of experts; sources in `moe_presets_match_published_active_parameters`.
            ("deepseek-v3", 671e9),
            ("kimi-k2", 1.04e12),
            ("qwen3-30b-a3b", 30.5e9),
            ("qwen3-235b-a22b", 235e9),
            ("gpt-oss-20b", 20.91e9),
            ("gpt-oss-120b", 116.83e9),
            ("mixtral-8x7b", 46.7e9),
            ("mixtral-8x22b", 141e9),
        ];
        for &(name, expected) in published {
            let actual = total_params(name);
            let error = (actual - expected).abs() / expected;
            assert!(
                error < 0.015,
                "{name}: {actual:.4e} parameters vs published {expected:.4e} ({:.2}% off)",
                error * 100.0
            );
        }
    }

    #[test]
    fn hybrid_presets_are_within_one_percent_of_published_totals() {
        // Nemotron 3 Nano 31.6B (arXiv 2512.20848, Table 1), Super 120.6B (arXiv 2512.20856),
        // Ultra 550B (its technical report), Nemotron-H 8B and 56B (arXiv 2504.03624, by name).
        for (name, expected) in [
            ("nemotron-3-nano", 31.6e9),
            ("nemotron-3-super", 120.6e9),
            ("nemotron-3-ultra", 550e9),
            ("nemotronh-8b", 8.1e9),
            ("nemotronh-56b", 56e9),
            // Qwen3-Next-80B-A3B: the 79,674,391,296 parameters of Qwen3-Coder-Next's published
            // safetensors (gated DeltaNet and gated attention, 512 experts).
            ("qwen3-next-80b-a3b", 79.674e9),
            // MiniMax-01 report (arXiv 2501.08313): 456B total.
            ("minimax-text-01", 456e9),
            // Jamba report (arXiv 2403.19887, Table 1) and model card: 52B total; Jamba-1.5
            // report (arXiv 2408.12570): Jamba-1.5-Large 398B total.
            ("jamba-v0.1", 52e9),
            ("jamba-1.5-large", 398e9),
        ] {
            let actual = total_params(name);
            let error = (actual - expected).abs() / expected;
            assert!(error < 0.01, "{name}: {actual:.4e} vs published {expected:.4e}");
        }
    }

    #[test]
    fn falcon_h1_counts_one_pre_norm_for_its_two_mixers() {
        // Per layer: the shared norm (1024); Mamba-2's in-projection 1024 x (2 x 1536 + 2 x 128
        // + 24), its convolution with bias (1536 + 256) x 5, A, D and dt bias (3 x 24) and
        // out-projection 1536 x 1024, with no gated norm; attention 1024 x (512 + 2 x 128) and
        // 512 x 1024; the MLP's norm and 3 x 1024 x 2048. Then two 32784 x 1024 embeddings and
        // the final norm: 521.4M, which Falcon-H1 publishes as 0.5B.
        let layer = 1024
            + 1024 * 3352
            + 1792 * 5
            + 72
            + 1536 * 1024
            + 1024 * 768
            + 512 * 1024
            + 1024
            + 3 * 1024 * 2048;
        let falcon = preset_model("falcon-h1-0.5b");
        assert_eq!(falcon.total_params(), 36 * layer + 2 * 32784 * 1024 + 1024);
        assert_eq!((total_params("falcon-h1-0.5b") / 1e8).round() / 10.0, 0.5);
    }

    #[test]
    fn moe_presets_match_published_active_parameters() {
        // (name, published active, whether the figure leaves out the input embedding lookup).
        let published: &[(&str, f64, bool)] = &[
            // DeepSeek-V3 technical report (arXiv 2412.19437): 671B total, 37B activated.
            ("deepseek-v3", 37e9, false),
            // Kimi K2 technical report (arXiv 2507.20534): 1.04T total, 32.6B activated.
            ("kimi-k2", 32.6e9, false),
            // Qwen3-30B-A3B / Qwen3-235B-A22B model cards: 30.5B / 3.3B and 235B / 22B.
            ("qwen3-30b-a3b", 3.3e9, false),
            ("qwen3-235b-a22b", 22e9, false),
            // OpenAI gpt-oss model card (arXiv 2508.10925) Table 1: 20.91B / 3.61B and
            // 116.83B / 5.13B, counting the unembedding but not the embedding as active.
            ("gpt-oss-20b", 3.61e9, true),
            ("gpt-oss-120b", 5.13e9, true),
            // Mistral AI announcements: Mixtral 8x7B 46.7B / 12.9B; Mixtral 8x22B 141B / 39B.
            ("mixtral-8x7b", 12.9e9, false),
            ("mixtral-8x22b", 39e9, false),
            // Nemotron 3 Nano 3.6B and Super 12.7B active with the embedding; Ultra 55B.
            ("nemotron-3-nano", 3.6e9, false),
            ("nemotron-3-super", 12.7e9, false),
            ("nemotron-3-ultra", 55e9, false),
            // Qwen3-Next-80B-A3B: 3,874,929,408 active (Qwen3-Coder-Next's published tensors
            // less the inactive experts').
            ("qwen3-next-80b-a3b", 3.875e9, false),
            // Jamba report (arXiv 2403.19887, Table 1) and model card: 12B active; Jamba-1.5
            // report (arXiv 2408.12570): Jamba-1.5-Large 94B active.
            ("jamba-v0.1", 12e9, false),
            ("jamba-1.5-large", 94e9, false),
        ];
        for &(name, expected, without_lookup) in published {
            let model = preset_model(name);
            let lookup = if without_lookup { model.vocab_size() * model.hidden_size() } else { 0 };
            let actual = (model.active_params() - lookup) as f64;
            let error = (actual - expected).abs() / expected;
            assert!(
                error < 0.02,
                "{name}: {actual:.4e} active vs published {expected:.4e} ({:.2}% off)",
                error * 100.0
            );
        }
        // MiniMax-01 (arXiv 2501.08313): 45.9B activated, counting neither the embedding nor the
        // output layer.
        let minimax = preset_model("minimax-text-01");
        let lookups = 2 * minimax.vocab_size() * minimax.hidden_size();
        let error = ((minimax.active_params() - lookups) as f64 - 45.9e9).abs() / 45.9e9;
        assert!(error < 0.01, "MiniMax-Text-01 active {:.2}% off", error * 100.0);
        // DeepSeek-V3 trains one MTP module on top of the 671B (the checkpoint's 685B also holds
        // the module's own copy of embedding and output head).
        let deepseek = preset_model("deepseek-v3");
        assert_eq!(deepseek.mtp_layers(), 1);
        assert!(deepseek.total_params() > deepseek.params_without_mtp() + 11_000_000_000);
    }

    #[test]
    fn megatron_gpt_presets_round_to_the_paper_table() {
        // Narayanan et al. 2021 Table 1 gives billions to one decimal.
        let table: &[(&str, f64)] = &[
            ("megatron-gpt-1.7b", 1.7),
            ("megatron-gpt-3.6b", 3.6),
            ("megatron-gpt-7.5b", 7.5),
            ("megatron-gpt-18.4b", 18.4),
            ("megatron-gpt-39.1b", 39.1),
            ("megatron-gpt-76.1b", 76.1),
            ("megatron-gpt-145.6b", 145.6),
            ("megatron-gpt-310.1b", 310.1),
            ("megatron-gpt-529.6b", 529.6),
            ("megatron-gpt-1t", 1008.0),
        ];
        for &(name, billions) in table {
            let rounded = (total_params(name) / 1e8).round() / 10.0;
            assert_eq!(rounded, billions, "{name}");
        }
    }

    #[test]
    fn mpt_presets_reproduce_llm_foundry_num_params_exactly() {
        // calibration/runs.csv `NumParams in table` at sequence length 2048.
        let table: &[(&str, u64)] = &[
            ("mpt-125m", 125_311_488),
            ("mpt-350m", 355_985_408),
            ("mpt-760m", 760_470_528),
            ("mpt-1b", 1_315_950_592),
            ("mpt-3b", 2_651_837_440),
            ("mpt-7b", 6_658_859_008),
            ("mpt-13b", 12_853_954_560),
            ("mpt-30b", 29_975_214_080),
            ("mpt-70b", 64_862_437_376),
        ];
        for &(name, expected) in table {
            let spec = model(name).unwrap();
            assert_eq!(spec.max_position_embeddings, Some(2048), "{name}");
            assert_eq!(Model::from_spec(&spec).unwrap().total_params(), expected, "{name}");
        }
    }

    #[test]
    fn low_precision_peaks_are_consistent() {
        let mut block_scaled = Vec::new();
        for file in GPUS {
            let gpu = Gpu::from_spec(&gpu(file.name).unwrap()).unwrap();
            let bf16 = gpu.peak_bf16().value();
            assert!(gpu.peak_fp16().value() >= bf16, "{}: fp16 below bf16", file.name);
            if let Some(fp8) = gpu.peak_fp8() {
                assert!(fp8.value() >= bf16, "{}: fp8 peak below bf16", file.name);
            }
            if let Some(fp4) = gpu.peak_fp4() {
                assert!(fp4.value() >= bf16, "{}: fp4 peak below bf16", file.name);
                let fp8 =
                    gpu.peak_fp8().unwrap_or_else(|| panic!("{}: fp4 without fp8", file.name));
                assert!(fp4.value() >= fp8.value(), "{}: fp4 peak below fp8", file.name);
                assert!(
                    gpu.block_scaled(),
                    "{}: fp4 tensor cores without block scaling",
                    file.name
                );
            }
            if gpu.block_scaled() {
                assert!(gpu.peak_fp8().is_some(), "{}: block-scaled but no fp8 peak", file.name);
                block_scaled.push(file.name);
            }
        }
        assert_eq!(
            block_scaled,
            ["b200", "b300", "gb200", "gb300"],
            "only Blackwell scales MX blocks"
        );
    }

    #[test]
    fn short_gpu_names_resolve_to_their_preset() {
        assert_eq!(gpu("h100").unwrap(), gpu("h100-sxm").unwrap());
        assert_eq!(gpu("A100").unwrap(), gpu("a100-80gb").unwrap());
        for (_, preset) in GPU_ALIASES {
            assert!(gpu(preset).is_ok(), "{preset}");
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = model("llama9").unwrap_err().to_string();
        assert!(
            err.contains("unknown model preset `llama9`") && err.contains("llama3.1-70b"),
            "{err}"
        );
    }
}
