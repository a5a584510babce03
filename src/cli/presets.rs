//! `meshplan presets`: every built-in model, GPU, software stack and document length
//! distribution with its key numbers and source.

use crate::hardware::{Cluster, ClusterSpec, LinkTier};
use crate::model::Model;
use crate::presets;
use anyhow::Context as _;
use serde::Serialize;

use super::args::{Format, PresetsArgs};
use super::{CliError, render};

#[derive(Serialize)]
struct ModelRow {
    name: String,
    display_name: String,
    layers: u64,
    hidden: u64,
    ffn: u64,
    heads: u64,
    kv_heads: u64,
    vocab: u64,
    /// Routed experts per MoE layer (`null` for a dense model).
    experts: Option<u64>,
    /// Experts each token is routed to (`null` for a dense model).
    top_k: Option<u64>,
    /// Intermediate width of one routed expert (`null` for a dense model).
    expert_ffn: Option<u64>,
    /// Every trained parameter, multi-token-prediction modules included.
    params_billions: f64,
    /// Parameters one token passes through (the total for a dense model).
    active_params_billions: f64,
    source: String,
}

#[derive(Serialize)]
struct GpuRow {
    name: String,
    display_name: String,
    bf16_tflops: f64,
    fp8_tflops: Option<f64>,
    fp4_tflops: Option<f64>,
    memory_gib: f64,
    memory_bandwidth_gbps: f64,
    gpus_per_node: u64,
    nvlink_domain: u64,
    nvlink_gbps: f64,
    network_gbps: f64,
    /// Host memory of one server, GB (`null` where the preset does not state it).
    host_memory_gb_per_node: Option<f64>,
    calibration: f64,
    source: String,
}

#[derive(Serialize)]
struct StackRow {
    id: String,
    name: String,
    /// The engine its plans export to (`null` when meshplan exports to none of its engines).
    engine: Option<String>,
    /// The code its facts were read from (repository and tag).
    code: String,
    /// Where each field comes from, by field.
    sources: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize)]
struct LengthsRow {
    name: String,
    documents: u64,
    mean_tokens: f64,
    longest_tokens: u64,
    source: String,
}

#[derive(Serialize)]
struct Catalogue {
    models: Vec<ModelRow>,
    gpus: Vec<GpuRow>,
    stacks: Vec<StackRow>,
    lengths: Vec<LengthsRow>,
}

fn lengths_row(name: &str) -> anyhow::Result<LengthsRow> {
    let spec = presets::lengths(name)?;
    let data =
        crate::data::Data::from_spec(&spec, Some(name)).map_err(|v| anyhow::anyhow!("{v}"))?;
    let distribution = data.distribution();
    Ok(LengthsRow {
        name: name.to_owned(),
        documents: distribution.documents(),
        mean_tokens: distribution.mean_length(),
        longest_tokens: distribution.max_length(),
        source: spec.source.unwrap_or_default(),
    })
}

fn model_row(name: &str) -> anyhow::Result<ModelRow> {
    let spec = presets::model(name)?;
    let model = Model::from_spec(&spec).map_err(|v| anyhow::anyhow!("{v}"))?;
    let moe = model.moe();
    Ok(ModelRow {
        name: spec.name.clone(),
        display_name: model.display_name().to_owned(),
        layers: model.num_layers(),
        hidden: model.hidden_size(),
        ffn: model.ffn_hidden_size(),
        heads: model.num_attention_heads(),
        kv_heads: model.num_kv_heads(),
        vocab: model.vocab_size(),
        experts: moe.map(|moe| moe.num_experts),
        top_k: moe.map(|moe| moe.top_k),
        expert_ffn: moe.map(|moe| moe.expert_ffn_hidden_size),
        params_billions: model.total_params() as f64 / 1e9,
        active_params_billions: model.active_params() as f64 / 1e9,
        source: spec.source.unwrap_or_default(),
    })
}

fn catalogue() -> anyhow::Result<Catalogue> {
    let models =
        presets::MODELS.iter().map(|file| model_row(file.name)).collect::<Result<_, _>>()?;
    let mut gpus = Vec::new();
    for file in presets::GPUS {
        let spec = presets::gpu(file.name)?;
        let calibration = spec.efficiency.calibration.unwrap_or(1.0);
        let cluster = Cluster::from_spec(&ClusterSpec { gpu: spec.clone(), num_gpus: 1 })
            .map_err(|v| anyhow::anyhow!("{v}"))?;
        let (gpu, links) = (cluster.gpu(), cluster.interconnect());
        gpus.push(GpuRow {
            name: spec.name.clone(),
            display_name: gpu.display_name().to_owned(),
            bf16_tflops: gpu.peak_bf16().as_tera(),
            fp8_tflops: gpu.peak_fp8().map(|p| p.as_tera()),
            fp4_tflops: gpu.peak_fp4().map(|p| p.as_tera()),
            memory_gib: gpu.memory().as_gib(),
            memory_bandwidth_gbps: gpu.memory_bandwidth().as_giga(),
            gpus_per_node: links.gpus_per_node(),
            nvlink_domain: links.nvlink_domain(),
            nvlink_gbps: links.bandwidth(LinkTier::Nvlink).as_giga(),
            network_gbps: links.bandwidth(LinkTier::Network).as_giga(),
            host_memory_gb_per_node: links
                .host_memory_per_gpu()
                .map(|per_gpu| per_gpu.value() * links.gpus_per_node() as f64 / 1e9),
            calibration,
            source: spec.source.unwrap_or_default(),
        });
    }
    let stacks = presets::StackCatalog::builtin()?
        .all()
        .map(|stack| StackRow {
            id: stack.id().to_owned(),
            name: stack.name().to_owned(),
            engine: stack.engine().map(|engine| engine.name().to_owned()),
            code: stack.code().to_owned(),
            sources: stack.sources().clone(),
        })
        .collect();
    let lengths =
        presets::LENGTHS.iter().map(|file| lengths_row(file.name)).collect::<Result<_, _>>()?;
    Ok(Catalogue { models, gpus, stacks, lengths })
}

/// Lists the presets.
pub fn run(args: &PresetsArgs) -> Result<String, CliError> {
    let catalogue = catalogue().map_err(CliError::Other)?;
    if args.format == Format::Json {
        return serde_json::to_string_pretty(&catalogue)
            .context("cannot serialize the presets")
            .map_err(CliError::Other);
    }
    let mut models = render::table(&[
        "model",
        "name",
        "layers",
        "hidden",
        "ffn",
        "heads/kv",
        "vocab",
        "experts/top-k",
        "expert ffn",
        "params B",
        "active B",
    ]);
    let optional = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    for m in &catalogue.models {
        let experts = match (m.experts, m.top_k) {
            (Some(experts), Some(top_k)) => format!("{experts}/{top_k}"),
            _ => "-".to_owned(),
        };
        models.add_row([
            m.name.clone(),
            m.display_name.clone(),
            m.layers.to_string(),
            m.hidden.to_string(),
            m.ffn.to_string(),
            format!("{}/{}", m.heads, m.kv_heads),
            m.vocab.to_string(),
            experts,
            optional(m.expert_ffn),
            format!("{:.2}", m.params_billions),
            format!("{:.2}", m.active_params_billions),
        ]);
    }
    render::align_numbers(&mut models, 2);
    let mut gpus = render::table(&[
        "gpu",
        "BF16 TF",
        "FP8 TF",
        "FP4 TF",
        "GiB",
        "HBM GB/s",
        "node/NVL",
        "NVLink GB/s*",
        "NIC GB/s*",
        "host GB/node",
        "calib.",
    ]);
    let optional = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
    for g in &catalogue.gpus {
        gpus.add_row([
            g.name.clone(),
            format!("{:.0}", g.bf16_tflops),
            optional(g.fp8_tflops),
            optional(g.fp4_tflops),
            format!("{:.1}", g.memory_gib),
            format!("{:.0}", g.memory_bandwidth_gbps),
            format!("{}/{}", g.gpus_per_node, g.nvlink_domain),
            format!("{:.0}", g.nvlink_gbps),
            format!("{:.1}", g.network_gbps),
            optional(g.host_memory_gb_per_node),
            format!("{:.3}", g.calibration),
        ]);
    }
    render::align_numbers(&mut gpus, 1);
    let mut stacks = render::table(&["stack", "name", "engine", "read from"]);
    for stack in &catalogue.stacks {
        stacks.add_row([
            stack.id.clone(),
            stack.name.clone(),
            stack.engine.clone().unwrap_or_else(|| "-".to_owned()),
            stack.code.clone(),
        ]);
    }
    let mut lengths = render::table(&["lengths", "documents", "mean tokens", "longest"]);
    for row in &catalogue.lengths {
        lengths.add_row([
            row.name.clone(),
            row.documents.to_string(),
            format!("{:.0}", row.mean_tokens),
            row.longest_tokens.to_string(),
        ]);
    }
    render::align_numbers(&mut lengths, 1);
    let mut sources = String::new();
    for m in &catalogue.models {
        sources.push_str(&format!("- {}: {}\n", m.name, m.source));
    }
    for g in &catalogue.gpus {
        sources.push_str(&format!("- {}: {}\n", g.name, g.source));
    }
    for stack in &catalogue.stacks {
        let fields: Vec<String> =
            stack.sources.iter().map(|(field, source)| format!("{field}: {source}")).collect();
        sources.push_str(&format!("- {}: {}\n", stack.id, fields.join("; ")));
    }
    for row in &catalogue.lengths {
        sources.push_str(&format!("- {}: {}\n", row.name, row.source));
    }
    Ok(format!(
        "Models\n{models}\n\nGPUs (* achievable per GPU and direction, after link efficiency)\n{gpus}\n\nSoftware stacks (--stack)\n{stacks}\n\nDocument length distributions (--lengths)\n{lengths}\n\nSources\n{sources}"
    ))
}
