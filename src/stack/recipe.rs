//! A stack's published performance recipes, validated: which runs each covers (model, GPU,
//! precision, GPU count) and the settings it uses, and the lookup of the one a run used.
//!
//! Entries of one stack never overlap, so at most one recipe covers a run and the order of the
//! entries does not matter.

use super::kinds::{CudaGraphImpl, CudaGraphModule, FlexBackend};
use super::recipe_spec::RecipeSpec;
use crate::plan::{ExpertDispatch, Precision, RecomputeKind, RecomputeModule};
use crate::violation::Collector;

/// What a recipe sets; `None` where it sets nothing.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecipeSettings {
    /// CUDA graphs.
    pub cuda_graphs: Option<CudaGraphImpl>,
    /// What the graphs capture (empty: the implementation's default).
    pub cuda_graph_scope: Vec<CudaGraphModule>,
    /// Activation recompute granularity.
    pub recompute: Option<RecomputeKind>,
    /// With selective recompute: the modules rerun.
    pub recompute_modules: Option<Vec<RecomputeModule>>,
    /// With full recompute: layers per pipeline stage that recompute.
    pub recompute_num_layers: Option<u64>,
    /// Layers whose activations go to host memory.
    pub offload_activation_layers: Option<u64>,
    /// Megatron-FSDP.
    pub fsdp: Option<bool>,
    /// NCCL user buffers.
    pub nccl_user_buffers: Option<bool>,
    /// The token dispatch.
    pub expert_dispatch: Option<ExpertDispatch>,
    /// The flex dispatcher's backend.
    pub flex_backend: Option<FlexBackend>,
    /// Expert-parallel all-to-all overlap.
    pub expert_comm_overlap: Option<bool>,
    /// Tensor-parallel communication overlap.
    pub tp_comm_overlap: Option<bool>,
    /// Layers at the end of the model kept in BF16.
    pub bf16_layers_at_end: Option<u64>,
    /// Transformer Engine op-fuser grouped MLP.
    pub fused_grouped_mlp: Option<bool>,
    /// FP8 dot-product attention.
    pub fp8_attention: Option<bool>,
}

/// A validated `[[recipe]]` entry; built only by [`check_recipes`].
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    models: Vec<String>,
    model_keys: Vec<String>,
    gpus: Vec<String>,
    precisions: Option<Vec<Precision>>,
    num_gpus: Option<Vec<u64>>,
    settings: RecipeSettings,
    source: String,
}

impl Recipe {
    /// The model names as the file writes them.
    pub fn models(&self) -> &[String] {
        &self.models
    }
    /// The GPU preset ids it covers.
    pub fn gpus(&self) -> &[String] {
        &self.gpus
    }
    /// The precisions it covers; `None`: every precision.
    pub fn precisions(&self) -> Option<&[Precision]> {
        self.precisions.as_deref()
    }
    /// The GPU counts it covers; `None`: every count.
    pub fn num_gpus(&self) -> Option<&[u64]> {
        self.num_gpus.as_deref()
    }
    /// What it sets.
    pub fn settings(&self) -> &RecipeSettings {
        &self.settings
    }
    /// Where its settings were read.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// The name, as the file writes it, of its model that `model` matches; its first model when
    /// none does.
    pub fn model_named(&self, model: &str) -> &str {
        let key = model_key(model);
        let index = self.model_keys.iter().position(|k| *k == key).unwrap_or(0);
        self.models.get(index).map_or("", String::as_str)
    }

    /// Whether it covers runs of this model (on some GPU, precision and GPU count).
    pub fn covers_model(&self, model: &str) -> bool {
        self.model_keys.contains(&model_key(model))
    }

    /// Whether it covers runs of this model on this GPU preset (at some precision and GPU count).
    pub fn covers_model_on(&self, model: &str, gpu: &str) -> bool {
        self.covers_model(model) && self.gpus.iter().any(|g| g.eq_ignore_ascii_case(gpu.trim()))
    }

    /// Whether it covers a run of this model, GPU preset, precision and GPU count.
    pub fn covers(&self, model: &str, gpu: &str, precision: Precision, num_gpus: u64) -> bool {
        self.covers_model_on(model, gpu)
            && self.precisions.as_ref().is_none_or(|list| list.contains(&precision))
            && self.num_gpus.as_ref().is_none_or(|list| list.contains(&num_gpus))
    }
}

/// The form model names are matched on: parenthesised qualifiers dropped (`DeepSeekV3
/// (dropless)`), then lowercase ASCII letters and digits only (`LLAMA3.1_405B` and
/// `Llama 3.1 405B` are both `llama31405b`).
pub fn model_key(name: &str) -> String {
    let mut depth = 0usize;
    let mut key = String::new();
    for c in name.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 && c.is_ascii_alphanumeric() => key.push(c.to_ascii_lowercase()),
            _ => {}
        }
    }
    key
}

/// Checks every entry, reporting each problem under `stack.recipe[i].field`, and returns the
/// validated recipes (only meaningful when no problem was added).
pub fn check_recipes(specs: &[RecipeSpec], problems: &mut Collector) -> Vec<Recipe> {
    let recipes: Vec<Recipe> =
        specs.iter().enumerate().map(|(i, spec)| check_one(i, spec, problems)).collect();
    for (i, a) in recipes.iter().enumerate() {
        for (j, b) in recipes.iter().enumerate().skip(i + 1) {
            if let Some(run) = overlap(a, b) {
                problems.add(
                    format!("stack.recipe[{j}]"),
                    run,
                    format!("is covered by stack.recipe[{i}] too"),
                    "split the entries so that each model, GPU, precision and GPU count has one recipe",
                );
            }
        }
    }
    recipes
}

fn check_one(i: usize, spec: &RecipeSpec, problems: &mut Collector) -> Recipe {
    let field = |name: &str| format!("stack.recipe[{i}].{name}");
    let model_keys: Vec<String> = spec.models.iter().map(|m| model_key(m)).collect();
    if spec.models.is_empty() {
        problems.add(field("models"), "[]", "names no model", "list the model, e.g. `LLAMA3_70B`");
    }
    for (model, key) in spec.models.iter().zip(&model_keys) {
        if key.is_empty() {
            problems.add(
                field("models"),
                format!("{model:?}"),
                "has no letter or digit outside parentheses",
                "write the model's name, e.g. `LLAMA3_70B`",
            );
        }
    }
    if spec.gpus.is_empty() {
        problems.add(field("gpus"), "[]", "names no GPU", "list GPU preset ids, e.g. `gb200`");
    }
    for gpu in &spec.gpus {
        let ok = !gpu.is_empty()
            && gpu.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok {
            problems.add(
                field("gpus"),
                format!("{gpu:?}"),
                "is not a GPU preset id",
                "use the preset's id, lowercase, e.g. `h100-sxm` or `gb200`",
            );
        }
    }
    if spec.precisions.as_ref().is_some_and(Vec::is_empty) {
        problems.add(
            field("precisions"),
            "[]",
            "names no precision",
            "list them, e.g. [\"bf16\"], or drop the key for every precision",
        );
    }
    let num_gpus = spec.num_gpus.as_ref().map(|counts| {
        if counts.is_empty() {
            problems.add(
                field("num_gpus"),
                "[]",
                "names no GPU count",
                "list them, or drop the key for every count",
            );
        }
        counts
            .iter()
            .filter_map(|&n| {
                if n < 1 {
                    problems.add(field("num_gpus"), n, "must be positive", "write the GPU count");
                }
                u64::try_from(n).ok()
            })
            .collect()
    });
    if spec.source.trim().is_empty() {
        problems.add(
            field("source"),
            "\"\"",
            "every recipe needs its source",
            "name the files and tag it was read from, e.g. `scripts/performance/...@v0.2.0`",
        );
    }
    let settings = check_settings(spec, &field, problems);
    if settings == RecipeSettings::default() {
        problems.add(
            format!("stack.recipe[{i}]"),
            spec.models.join(", "),
            "sets nothing",
            "add the settings the recipe uses (e.g. `cuda_graphs = \"none\"`), or drop the entry",
        );
    }
    Recipe {
        models: spec.models.clone(),
        model_keys,
        gpus: spec.gpus.clone(),
        precisions: spec.precisions.clone(),
        num_gpus,
        settings,
        source: spec.source.clone(),
    }
}

fn check_settings(
    spec: &RecipeSpec,
    field: &dyn Fn(&str) -> String,
    problems: &mut Collector,
) -> RecipeSettings {
    let scope = spec.cuda_graph_scope.clone().unwrap_or_default();
    let scoped =
        matches!(spec.cuda_graphs, Some(CudaGraphImpl::Local | CudaGraphImpl::TransformerEngine));
    if spec.cuda_graph_scope.is_some() && (!scoped || scope.is_empty()) {
        problems.add(
            field("cuda_graph_scope"),
            format!("{scope:?}"),
            "needs `cuda_graphs = \"local\"` or `\"transformer-engine\"` and at least one scope",
            "set cuda_graphs, or drop cuda_graph_scope",
        );
    }
    if spec.recompute_modules.is_some() && spec.recompute != Some(RecomputeKind::Selective) {
        problems.add(
            field("recompute_modules"),
            format!("{:?}", spec.recompute_modules.as_deref().unwrap_or_default()),
            "applies only to selective recompute",
            "add `recompute = \"selective\"`, or drop recompute_modules",
        );
    }
    if spec.recompute_modules.as_ref().is_some_and(Vec::is_empty) {
        problems.add(field("recompute_modules"), "[]", "names no module", "list the modules");
    }
    if spec.recompute_num_layers.is_some() && spec.recompute != Some(RecomputeKind::Full) {
        problems.add(
            field("recompute_num_layers"),
            spec.recompute_num_layers.unwrap_or_default(),
            "applies only to full recompute",
            "add `recompute = \"full\"`, or drop recompute_num_layers",
        );
    }
    let positive = |name: &str, value: Option<i64>, problems: &mut Collector| {
        value.and_then(|n| {
            if n < 1 {
                problems.add(field(name), n, "must be at least 1", "write the layer count");
            }
            u64::try_from(n).ok().filter(|n| *n > 0)
        })
    };
    let recompute_num_layers =
        positive("recompute_num_layers", spec.recompute_num_layers, problems);
    let offload = positive("offload_activation_layers", spec.offload_activation_layers, problems);
    let low_precision_only =
        spec.precisions.as_ref().is_some_and(|list| list.iter().all(|p| p.is_low_precision()));
    if spec.bf16_layers_at_end.is_some() && !low_precision_only {
        problems.add(
            field("bf16_layers_at_end"),
            spec.bf16_layers_at_end.unwrap_or_default(),
            "keeps layers in BF16 under a low-precision recipe only",
            "list only FP8 / FP4 precisions in `precisions`",
        );
    }
    if spec.flex_backend.is_some() && spec.expert_dispatch != Some(ExpertDispatch::Deduplicated) {
        problems.add(
            field("flex_backend"),
            spec.flex_backend.map_or("", FlexBackend::name),
            "is the backend of the flex dispatcher",
            "add `expert_dispatch = \"deduplicated\"`, or drop flex_backend",
        );
    }
    RecipeSettings {
        cuda_graphs: spec.cuda_graphs,
        cuda_graph_scope: scope,
        recompute: spec.recompute,
        recompute_modules: spec.recompute_modules.clone(),
        recompute_num_layers,
        offload_activation_layers: offload,
        fsdp: spec.fsdp,
        nccl_user_buffers: spec.nccl_user_buffers,
        expert_dispatch: spec.expert_dispatch,
        flex_backend: spec.flex_backend,
        expert_comm_overlap: spec.expert_comm_overlap,
        tp_comm_overlap: spec.tp_comm_overlap,
        bf16_layers_at_end: positive("bf16_layers_at_end", spec.bf16_layers_at_end, problems),
        fused_grouped_mlp: spec.fused_grouped_mlp,
        fp8_attention: spec.fp8_attention,
    }
}

/// A run two recipes both cover, in words, if any.
fn overlap(a: &Recipe, b: &Recipe) -> Option<String> {
    let model = a.model_keys.iter().find(|key| b.model_keys.contains(key))?;
    let gpu = a.gpus.iter().find(|gpu| b.gpus.iter().any(|g| g.eq_ignore_ascii_case(gpu)))?;
    let precision = match (&a.precisions, &b.precisions) {
        (Some(x), Some(y)) => Some(*x.iter().find(|p| y.contains(p))?),
        (Some(x), None) | (None, Some(x)) => x.first().copied(),
        (None, None) => None,
    };
    let count = match (&a.num_gpus, &b.num_gpus) {
        (Some(x), Some(y)) => Some(*x.iter().find(|n| y.contains(n))?),
        _ => None,
    };
    Some(format!(
        "{model} on {gpu} {}{}",
        precision.map_or("(every precision)", Precision::name),
        count.map_or_else(String::new, |n| format!(" with {n} GPUs"))
    ))
}

/// The one recipe of `recipes` that covers a run, if any.
pub fn recipe_for<'a>(
    recipes: &'a [Recipe],
    model: &str,
    gpu: &str,
    precision: Precision,
    num_gpus: u64,
) -> Option<&'a Recipe> {
    recipes.iter().find(|recipe| recipe.covers(model, gpu, precision, num_gpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<RecipeSpec>, toml::de::Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            recipe: Vec<RecipeSpec>,
        }
        toml::from_str::<File>(text).map(|file| file.recipe)
    }

    const TWO: &str = r#"
        [[recipe]]
        models = ["LLAMA3_70B"]
        gpus = ["gb200"]
        precisions = ["fp8-current"]
        offload_activation_layers = 40
        fsdp = true
        source = "scripts/performance/configs/llama3/workload_base_configs.py@v0.2.0"

        [[recipe]]
        models = ["DEEPSEEK_V3"]
        gpus = ["h100-sxm"]
        recompute = "selective"
        recompute_modules = ["mla_up_proj", "mlp"]
        expert_dispatch = "deduplicated"
        flex_backend = "deepep"
        expert_comm_overlap = true
        source = "scripts/performance/configs/deepseek/workload_base_configs.py@v0.2.0"
    "#;

    #[test]
    fn model_names_match_on_a_normalised_form() {
        assert_eq!(model_key("LLAMA3.1_405B"), "llama31405b");
        assert_eq!(model_key("Llama 3.1 405B"), model_key("LLAMA31_405B"));
        assert_eq!(model_key("DeepSeekV3 (dropless)"), model_key("DEEPSEEK_V3"));
        assert_eq!(model_key("GPT OSS 120B"), model_key("GPT_OSS_120B"));
    }

    #[test]
    fn the_lookup_finds_the_entry_covering_model_gpu_and_precision() {
        let mut problems = Collector::default();
        let recipes = check_recipes(&parse(TWO).unwrap(), &mut problems);
        assert!(problems.finish().is_ok());
        let llama = recipe_for(&recipes, "Llama 3 70B", "GB200", Precision::Fp8Current, 64);
        let llama = llama.unwrap().settings();
        assert_eq!((llama.offload_activation_layers, llama.fsdp), (Some(40), Some(true)));
        assert!(recipe_for(&recipes, "LLAMA3_70B", "gb200", Precision::Bf16, 64).is_none());
        assert!(recipe_for(&recipes, "LLAMA3_70B", "gb300", Precision::Fp8Current, 64).is_none());
        let deepseek = recipe_for(&recipes, "DeepSeekV3", "h100-sxm", Precision::Mxfp8, 1024);
        let deepseek = deepseek.unwrap().settings();
        assert_eq!(
            deepseek.recompute_modules.as_deref(),
            Some(&[RecomputeModule::MlaUpProj, RecomputeModule::Mlp][..])
        );
        assert_eq!(deepseek.expert_dispatch, Some(ExpertDispatch::Deduplicated));
    }

    #[test]
    fn unknown_keys_and_entries_without_a_source_are_rejected() {
        let unknown = TWO.replace("fsdp = true", "fsdp = true\nmegatron_fsdp = true");
        assert!(parse(&unknown).unwrap_err().to_string().contains("megatron_fsdp"));
        let sourceless = TWO.replacen(
            "source = \"scripts/performance/configs/llama3/workload_base_configs.py@v0.2.0\"",
            "",
            1,
        );
        assert!(parse(&sourceless).unwrap_err().to_string().contains("source"));
        let mut specs = parse(TWO).unwrap();
        specs[0].source = " ".into();
        let mut problems = Collector::default();
        check_recipes(&specs, &mut problems);
        let text = problems.finish().unwrap_err().to_string();
        assert!(text.contains("stack.recipe[0].source"), "{text}");
    }

    #[test]
    fn every_problem_is_reported_at_once_with_its_field() {
        let mut specs = parse(TWO).unwrap();
        specs[0].recompute_modules = Some(vec![RecomputeModule::Mlp]);
        specs[0].gpus = vec!["GB200 NVL72".into()];
        specs[1].expert_dispatch = None;
        specs[1].offload_activation_layers = Some(0);
        // BF16 layers under a recipe that may be BF16 itself (no precisions listed).
        specs[1].bf16_layers_at_end = Some(14);
        let mut problems = Collector::default();
        check_recipes(&specs, &mut problems);
        let text = problems.finish().unwrap_err().to_string();
        for field in [
            "stack.recipe[0].recompute_modules",
            "stack.recipe[0].gpus",
            "stack.recipe[1].flex_backend",
            "stack.recipe[1].offload_activation_layers",
            "stack.recipe[1].bf16_layers_at_end",
        ] {
            assert!(text.contains(field), "{field} missing from {text}");
        }
    }

    #[test]
    fn overlapping_entries_are_refused() {
        let mut specs = parse(TWO).unwrap();
        specs[1].models = vec!["Llama 3 70B".into()];
        specs[1].gpus = vec!["gb200".into()];
        let mut problems = Collector::default();
        check_recipes(&specs, &mut problems);
        let text = problems.finish().unwrap_err().to_string();
        assert!(text.contains("stack.recipe[1]") && text.contains("llama370b on gb200"), "{text}");
    }
}
