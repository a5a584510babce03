//! Hybrid models (Nemotron-H, Nemotron 3, Qwen3-Next, MiniMax-01, Falcon-H1, Jamba): a layer
//! pattern of Mamba-2, Mamba-1, gated DeltaNet, lightning attention, attention, MLP, MoE and
//! Falcon-H1's parallel layers in any order, as Megatron-LM's `--hybrid-override-pattern` writes
//! it, and the Mamba-2 and gated DeltaNet mixers' sizes (lightning attention's are in
//! `lightning.rs`, Mamba-1's in `mamba1.rs`).
//!
//! In a hybrid model each pattern symbol is one layer with its own pre-norm and residual: `*` is
//! an attention block alone and `-` an MLP alone, so a GPT layer is the pair `*-`. A pattern that
//! is only such pairs (`*-` repeated, or `*E` for an MoE model) is the plain transformer and is
//! validated as one, so it prices exactly as the model without a pattern.

use serde::{Deserialize, Serialize};

use super::lightning::{self, LightningAttention, LightningAttentionSpec};
use super::mamba1::{self, Mamba1, Mamba1Spec};
use crate::violation::Collector;

/// One layer of a hybrid pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sublayer {
    /// A Mamba-2 mixer (`M`).
    Mamba,
    /// A self-attention block (`*`).
    Attention,
    /// A dense MLP (`-`).
    Mlp,
    /// A mixture of experts (`E`).
    Moe,
    /// A gated DeltaNet linear-attention block (`G`; Qwen3-Next, Megatron-Core 0.17).
    GatedDeltaNet,
    /// A lightning attention block (`L`; MiniMax-01's linear attention, meshplan's own symbol:
    /// Megatron-LM has no such layer).
    LightningAttention,
    /// A Falcon-H1 layer (`P`, Megatron-Bridge's symbol for its `FalconH1Layer`; Megatron-LM has
    /// no such layer): a Mamba-2 mixer and an attention block side by side on one pre-norm,
    /// their outputs summed into one residual, then a dense MLP with its own pre-norm.
    ParallelHybrid,
    /// A Mamba-1 mixer (`S`, for its selective scan; Jamba's Mamba layers, meshplan's own
    /// symbol: Megatron-LM has no such layer).
    Mamba1,
}

/// Layer kinds a hybrid pattern has.
pub const SUBLAYER_KINDS: usize = 8;

/// The blocks a Falcon-H1 layer ([`Sublayer::ParallelHybrid`]) is made of. They are those of
/// the `M`, `*` and `-` layers but for one pre-norm: the two mixers read the same one.
pub const PARALLEL_HYBRID_PARTS: [Sublayer; 3] =
    [Sublayer::Mamba, Sublayer::Attention, Sublayer::Mlp];

impl Sublayer {
    /// Every kind, in the order counts are kept.
    pub const ALL: [Sublayer; SUBLAYER_KINDS] = [
        Sublayer::Mamba,
        Sublayer::Attention,
        Sublayer::Mlp,
        Sublayer::Moe,
        Sublayer::GatedDeltaNet,
        Sublayer::LightningAttention,
        Sublayer::ParallelHybrid,
        Sublayer::Mamba1,
    ];

    /// Position in [`Sublayer::ALL`] and in every per-kind count.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The pattern symbol.
    pub fn symbol(self) -> char {
        match self {
            Sublayer::Mamba => 'M',
            Sublayer::Attention => '*',
            Sublayer::Mlp => '-',
            Sublayer::Moe => 'E',
            Sublayer::GatedDeltaNet => 'G',
            Sublayer::LightningAttention => 'L',
            Sublayer::ParallelHybrid => 'P',
            Sublayer::Mamba1 => 'S',
        }
    }

    fn from_symbol(symbol: char) -> Option<Sublayer> {
        Sublayer::ALL.into_iter().find(|kind| kind.symbol() == symbol)
    }
}

/// Layers of each kind in a run of consecutive layers, indexed by [`Sublayer::index`] (each at
/// most the pattern's length, which `limits::LAYERS` bounds far below `u16::MAX`).
pub type SublayerCounts = [u16; SUBLAYER_KINDS];

/// The Mamba-2 mixer as written in a file (Megatron-LM `--mamba-num-heads`, `--mamba-head-dim`,
/// `--mamba-state-dim`, `--mamba-num-groups`; Hugging Face `mamba_num_heads`, `mamba_head_dim`,
/// `ssm_state_size`, `n_groups`, `conv_kernel`, `chunk_size`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MambaSpec {
    /// SSM heads (the inner width is `num_heads x head_dim`).
    pub num_heads: i64,
    /// Width of one SSM head.
    pub head_dim: i64,
    /// State size per group (`d_state`).
    pub state_size: i64,
    /// Groups sharing the B and C projections (`n_groups`; default 8, Megatron-LM's).
    #[serde(default)]
    pub num_groups: Option<i64>,
    /// Width of the causal depthwise convolution (`d_conv`; default 4).
    #[serde(default)]
    pub conv_kernel: Option<i64>,
    /// Chunk length of the chunked state-space scan (default 128, Megatron-LM's).
    #[serde(default)]
    pub chunk_size: Option<i64>,
    /// Whether the gate z multiplies the scan's output through an RMSNorm over the inner width
    /// (default true, Megatron-Core's `rmsnorm`); false, as Falcon-H1's `mamba_rms_norm`, gates
    /// inside the scan kernel with no norm and no norm weights.
    #[serde(default)]
    pub gated_norm: Option<bool>,
}

/// Validated Mamba-2 mixer sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mamba {
    /// SSM heads.
    pub num_heads: u64,
    /// Width of one head.
    pub head_dim: u64,
    /// State size per group.
    pub state_size: u64,
    /// Groups sharing B and C.
    pub num_groups: u64,
    /// Convolution width.
    pub conv_kernel: u64,
    /// Scan chunk length.
    pub chunk_size: u64,
    /// Whether the gated RMSNorm runs (else the scan kernel applies the gate).
    pub gated_norm: bool,
}

impl Mamba {
    /// Inner width `num_heads x head_dim` (the x and z streams).
    pub fn inner(&self) -> u64 {
        self.num_heads * self.head_dim
    }

    /// Width of the B and C streams together (`2 x groups x state`).
    pub fn bc(&self) -> u64 {
        2 * self.num_groups * self.state_size
    }

    /// Channels the convolution runs over: x, B and C.
    pub fn conv_channels(&self) -> u64 {
        self.inner() + self.bc()
    }

    /// Output width of the input projection: z, x, B, C and one dt per head.
    pub fn in_projection(&self) -> u64 {
        2 * self.inner() + self.bc() + self.num_heads
    }

    /// Parameters of one Mamba-2 layer besides its pre-norm: the input projection, the
    /// convolution's weights and biases, dt bias, A and D per head, the gated norm over the inner
    /// width (when it runs) and the output projection.
    pub fn params(&self, hidden: u64) -> u64 {
        let conv = self.conv_channels() * (self.conv_kernel + 1);
        let norm = if self.gated_norm { self.inner() } else { 0 };
        hidden * self.in_projection() + conv + 3 * self.num_heads + norm + self.inner() * hidden
    }

    /// Forward FLOPs per token of the chunked scan's matmuls (SSD, Dao and Gu 2024, section 6,
    /// counted kernel by kernel over mamba_ssm's `_mamba_chunk_scan_combined_fwd`): per head the
    /// chunk's state `B^T x` (`2 P N`), the output's read of the state passed in by `C`
    /// (`2 P N`) and the causal half of the chunk's `Q x Q` scores against x (`Q P`); per group
    /// the full `C B^T` block (`2 Q N`).
    pub fn scan_flops_per_token(&self) -> f64 {
        let (q, n, p) = (self.chunk_size as f64, self.state_size as f64, self.head_dim as f64);
        let (heads, groups) = (self.num_heads as f64, self.num_groups as f64);
        heads * (4.0 * p * n + q * p) + 2.0 * groups * q * n
    }

    /// Backward FLOPs per token of the chunked scan (`_mamba_chunk_scan_combined_bwd`: the
    /// forward's states recomputed, then the gradients of x, B, C, dt and the states), about
    /// 2.6 times the forward's.
    pub fn scan_backward_flops_per_token(&self) -> f64 {
        let (q, n, p) = (self.chunk_size as f64, self.state_size as f64, self.head_dim as f64);
        let (heads, groups) = (self.num_heads as f64, self.num_groups as f64);
        heads * (10.0 * p * n + 3.0 * q * p) + 6.0 * groups * q * n
    }

    /// Forward FLOPs per token of the depthwise convolution.
    pub fn conv_flops_per_token(&self) -> f64 {
        2.0 * (self.conv_channels() * self.conv_kernel) as f64
    }
}

/// Gated DeltaNet linear attention as written in a file (Hugging Face Qwen3-Next
/// `linear_num_key_heads`, `linear_num_value_heads`, `linear_key_head_dim`,
/// `linear_value_head_dim`, `linear_conv_kernel_dim`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinearAttentionSpec {
    /// Query and key heads.
    pub num_key_heads: i64,
    /// Value heads (a multiple of the key heads, which each serve a group of them).
    pub num_value_heads: i64,
    /// Width of one query or key head.
    pub key_head_dim: i64,
    /// Width of one value head.
    pub value_head_dim: i64,
    /// Width of the causal depthwise convolution over queries, keys and values (default 4).
    #[serde(default)]
    pub conv_kernel: Option<i64>,
    /// Chunk length of the chunked delta-rule kernel (default 64, flash-linear-attention's).
    #[serde(default)]
    pub chunk_size: Option<i64>,
}

/// Validated gated DeltaNet sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearAttention {
    /// Query and key heads.
    pub num_key_heads: u64,
    /// Value heads.
    pub num_value_heads: u64,
    /// Query or key head width.
    pub key_head_dim: u64,
    /// Value head width.
    pub value_head_dim: u64,
    /// Convolution width.
    pub conv_kernel: u64,
    /// Kernel chunk length.
    pub chunk_size: u64,
}

impl LinearAttention {
    /// Width of the queries (or the keys).
    pub fn key_width(&self) -> u64 {
        self.num_key_heads * self.key_head_dim
    }

    /// Width of the values (and of the output gate z and the block's output).
    pub fn value_width(&self) -> u64 {
        self.num_value_heads * self.value_head_dim
    }

    /// Output width of the input projections: q, k, v, the output gate z, and per value head
    /// the write strength beta and the decay's input (transformers' `in_proj_qkvz` and
    /// `in_proj_ba`).
    pub fn in_projection(&self) -> u64 {
        2 * self.key_width() + 2 * self.value_width() + 2 * self.num_value_heads
    }

    /// Channels the convolution runs over: q, k and v.
    pub fn conv_channels(&self) -> u64 {
        2 * self.key_width() + self.value_width()
    }

    /// Parameters of one block besides its pre-norm: the input projections, the convolution
    /// (no bias), the decay's A and dt bias per value head, the gated norm over one value head
    /// and the output projection (transformers `Qwen3NextGatedDeltaNet`).
    pub fn params(&self, hidden: u64) -> u64 {
        hidden * self.in_projection()
            + self.conv_channels() * self.conv_kernel
            + 2 * self.num_value_heads
            + self.value_head_dim
            + self.value_width() * hidden
    }

    /// Forward FLOPs per token of the chunked gated delta rule (Yang et al. 2024's WY form, as
    /// flash-linear-attention's `chunk_gated_delta_rule` runs it), per value head: `K K^T`
    /// within a chunk (`2 C dk`), the triangular solve (`C^2 / 3`), the WY factors `W` and `U`
    /// (`2 C dk + 2 C dv`), the state's read by `W` and its update by `K^T U` (`2 dk dv` each),
    /// and the output from the state and within the chunk (`2 dk dv + 2 C dk + 2 C dv`).
    pub fn scan_flops_per_token(&self) -> f64 {
        let (c, dk, dv) =
            (self.chunk_size as f64, self.key_head_dim as f64, self.value_head_dim as f64);
        let per_head = 6.0 * c * dk + 4.0 * c * dv + c * c / 3.0 + 6.0 * dk * dv;
        self.num_value_heads as f64 * per_head
    }

    /// Backward FLOPs per token of the chunked delta rule, taken at the chunked scan's ratio,
    /// 2.6 times the forward (`Mamba::scan_backward_flops_per_token`: the kernel recomputes the
    /// states and forms the gradients of q, k, v, beta and the decay from them).
    pub fn scan_backward_flops_per_token(&self) -> f64 {
        2.6 * self.scan_flops_per_token()
    }

    /// Bytes of one block's recurrent state per sequence (FP32, `dk x dv` per value head): what
    /// LASP-2 gathers across the context-parallel ranks.
    pub fn state_bytes(&self) -> f64 {
        (self.num_value_heads * self.key_head_dim * self.value_head_dim) as f64 * 4.0
    }
}

/// A validated hybrid layout. Obtainable only through validation (`counts` is private).
#[derive(Debug, Clone, PartialEq)]
pub struct Hybrid {
    /// One kind per layer, first to last.
    pub pattern: Vec<Sublayer>,
    /// Layers of each kind in the whole pattern, counted once at validation (the cost model
    /// reads them for every estimate).
    counts: SublayerCounts,
    /// The Mamba-2 mixer (`None` when the pattern has no `M`).
    pub mamba: Option<Mamba>,
    /// The gated DeltaNet blocks (`None` when the pattern has no `G`).
    pub linear_attention: Option<LinearAttention>,
    /// The lightning attention blocks (`None` when the pattern has no `L`).
    pub lightning_attention: Option<LightningAttention>,
    /// The Mamba-1 mixer (`None` when the pattern has no `S`).
    pub mamba1: Option<Mamba1>,
}

impl Hybrid {
    /// Layers of each kind among `count` layers from layer `first`.
    pub fn counts_in(&self, first: u64, count: u64) -> SublayerCounts {
        let start = (first as usize).min(self.pattern.len());
        let end = (first.saturating_add(count) as usize).min(self.pattern.len());
        count_kinds(&self.pattern[start..end])
    }

    /// Layers of each kind in the whole model.
    pub fn counts(&self) -> SublayerCounts {
        self.counts
    }

    /// The pattern as Megatron-LM writes it.
    pub fn pattern_text(&self) -> String {
        self.pattern.iter().map(|kind| kind.symbol()).collect()
    }
}

/// Layers of each kind among `kinds`.
fn count_kinds(kinds: &[Sublayer]) -> SublayerCounts {
    let mut counts = [0; SUBLAYER_KINDS];
    for kind in kinds {
        counts[kind.index()] += 1;
    }
    counts
}

/// What validating a pattern gives: a hybrid layout, or the plain transformer it spells.
pub(super) enum Layout {
    /// Pairs of attention and MLP (or MoE) only: `layers` plain transformer layers.
    Transformer { layers: u64 },
    /// A true hybrid (boxed: it holds every mixer's sizes).
    Hybrid(Box<Hybrid>),
}

/// The token mixers' tables of a model file, which a pattern's `M`, `G`, `L` and `S` layers
/// need.
#[derive(Debug, Clone, Copy)]
pub(super) struct MixerSpecs<'a> {
    /// `[mamba]`.
    pub mamba: Option<&'a MambaSpec>,
    /// `[linear_attention]`.
    pub linear: Option<&'a LinearAttentionSpec>,
    /// `[lightning_attention]`.
    pub lightning: Option<&'a LightningAttentionSpec>,
    /// `[mamba1]`.
    pub mamba1: Option<&'a Mamba1Spec>,
}

/// Checks a pattern against the rest of the model: every symbol known, its length `num_layers`,
/// each mixer's table present exactly when its symbol occurs, experts present exactly when `E`
/// occurs.
pub(super) fn validate(
    collector: &mut Collector,
    pattern: &str,
    num_layers: i64,
    mixers: MixerSpecs,
    has_moe: bool,
) -> Layout {
    let MixerSpecs { mamba, linear, lightning, mamba1 } = mixers;
    let mut kinds = Vec::with_capacity(pattern.len().min(crate::limits::LAYERS as usize));
    for (position, symbol) in pattern.chars().enumerate() {
        if position as u64 >= crate::limits::LAYERS {
            collector.add(
                "model.hybrid_pattern",
                format!("({} symbols)", pattern.chars().count()),
                format!(
                    "is longer than the largest layer count meshplan prices, {}",
                    crate::limits::LAYERS
                ),
                format!("give at most {} layers", crate::limits::LAYERS),
            );
            break;
        }
        match Sublayer::from_symbol(symbol) {
            Some(kind) => kinds.push(kind),
            None => collector.add(
                "model.hybrid_pattern",
                pattern,
                format!("has the unknown symbol `{symbol}` at layer {position}"),
                "use M (Mamba-2), S (Mamba-1), G (gated DeltaNet), L (lightning attention), * (attention), - (MLP), E (mixture of experts) and P (Falcon-H1's parallel Mamba-2 and attention, then an MLP); drop the `|` pipeline separators",
            ),
        }
    }
    if kinds.is_empty() {
        collector.add(
            "model.hybrid_pattern",
            format!("\"{pattern}\""),
            "has no layers",
            "give one symbol per layer, e.g. \"M-M*-\"",
        );
    }
    if num_layers > 0 && kinds.len() as i64 != num_layers && kinds.len() == pattern.chars().count()
    {
        collector.add(
            "model.num_layers",
            num_layers,
            format!("differs from the pattern's {} layers", kinds.len()),
            "count every symbol of the pattern as one layer (Megatron-LM's --num-layers)",
        );
    }
    let has = |kind: Sublayer| kinds.contains(&kind);
    // A Falcon-H1 layer's Mamba-2 mixer is sized by the same table as an `M` layer.
    let parallel_only = has(Sublayer::ParallelHybrid) && !has(Sublayer::Mamba);
    let mamba_kind = if parallel_only { Sublayer::ParallelHybrid } else { Sublayer::Mamba };
    for (kind, table, set, contents) in [
        (mamba_kind, "mamba", mamba.is_some(), "num_heads, head_dim and state_size"),
        (
            Sublayer::GatedDeltaNet,
            "linear_attention",
            linear.is_some(),
            "the key and value heads and their widths",
        ),
        (
            Sublayer::LightningAttention,
            "lightning_attention",
            lightning.is_some(),
            "num_heads and head_dim",
        ),
        (Sublayer::Mamba1, "mamba1", mamba1.is_some(), "inner_size and dt_rank"),
    ] {
        mixer_table(collector, kind, table, has(kind), set, contents);
    }
    if has(Sublayer::Moe) != has_moe {
        let (value, message, hint) = if has_moe {
            ("(set)", "is unused: the pattern has no E layer", "remove [moe] or add E layers")
        } else {
            ("(unset)", "is required by the pattern's E layers", "add a [moe] table")
        };
        collector.add("model.moe", value, message, hint);
    }
    let mamba = mamba.map(|spec| validate_mamba(collector, spec));
    let linear_attention = linear.map(|spec| validate_linear(collector, spec));
    let lightning_attention = lightning.map(|spec| lightning::validate(collector, spec));
    let mamba1 = mamba1.map(|spec| mamba1::validate(collector, spec));
    let pairs = kinds.len() % 2 == 0
        && kinds.chunks(2).all(|pair| {
            pair[0] == Sublayer::Attention
                && pair[1] == if has_moe { Sublayer::Moe } else { Sublayer::Mlp }
        });
    if pairs && !kinds.is_empty() {
        return Layout::Transformer { layers: kinds.len() as u64 / 2 };
    }
    let counts = count_kinds(&kinds);
    Layout::Hybrid(Box::new(Hybrid {
        pattern: kinds,
        counts,
        mamba,
        linear_attention,
        lightning_attention,
        mamba1,
    }))
}

/// Checks that a mixer's `[table]` is present exactly when the pattern has `kind` layers.
fn mixer_table(
    collector: &mut Collector,
    kind: Sublayer,
    table: &str,
    used: bool,
    set: bool,
    contents: &str,
) {
    let symbol = kind.symbol();
    match (used, set) {
        (true, false) => collector.add(
            format!("model.{table}"),
            "(unset)",
            format!("is required by the pattern's {symbol} layers"),
            format!("add a [{table}] table with {contents}"),
        ),
        (false, true) => collector.add(
            format!("model.{table}"),
            "(set)",
            format!("is unused: the pattern has no {symbol} layer"),
            format!("remove the [{table}] table or add {symbol} layers to the pattern"),
        ),
        _ => {}
    }
}

fn validate_linear(collector: &mut Collector, spec: &LinearAttentionSpec) -> LinearAttention {
    let accepted = |collector: &mut Collector, name: &str, value: i64| {
        super::accepted(collector, &format!("linear_attention.{name}"), value)
    };
    let key_heads = accepted(collector, "num_key_heads", spec.num_key_heads);
    let value_heads = accepted(collector, "num_value_heads", spec.num_value_heads);
    let key_dim = accepted(collector, "key_head_dim", spec.key_head_dim);
    let value_dim = accepted(collector, "value_head_dim", spec.value_head_dim);
    let conv_kernel = accepted(collector, "conv_kernel", spec.conv_kernel.unwrap_or(4));
    let chunk_size = accepted(collector, "chunk_size", spec.chunk_size.unwrap_or(64));
    // The queries' (or keys') width and the values' (the output gate's and the block's output).
    for (what, heads, dim) in [
        (
            "key width",
            ("linear_attention.num_key_heads", key_heads),
            ("linear_attention.key_head_dim", key_dim),
        ),
        (
            "value width",
            ("linear_attention.num_value_heads", value_heads),
            ("linear_attention.value_head_dim", value_dim),
        ),
    ] {
        if let ((heads_key, Some(heads)), (dim_key, Some(dim))) = (heads, dim) {
            let factors = [(heads_key, heads), (dim_key, dim)];
            super::bounds::check_width(collector, what, factors[1], &factors);
        }
    }
    if let (Some(key_heads), Some(value_heads)) = (key_heads, value_heads)
        && !value_heads.is_multiple_of(key_heads)
    {
        collector.add(
            "model.linear_attention.num_value_heads",
            value_heads,
            format!("is not a multiple of num_key_heads {key_heads}"),
            "each key head serves a whole number of value heads",
        );
    }
    LinearAttention {
        num_key_heads: key_heads.unwrap_or(1),
        num_value_heads: value_heads.unwrap_or(1),
        key_head_dim: key_dim.unwrap_or(1),
        value_head_dim: value_dim.unwrap_or(1),
        conv_kernel: conv_kernel.unwrap_or(1),
        chunk_size: chunk_size.unwrap_or(1),
    }
}

fn validate_mamba(collector: &mut Collector, spec: &MambaSpec) -> Mamba {
    let accepted = |collector: &mut Collector, name: &str, value: i64| {
        super::accepted(collector, &format!("mamba.{name}"), value)
    };
    let heads = accepted(collector, "num_heads", spec.num_heads);
    let dim = accepted(collector, "head_dim", spec.head_dim);
    let state = accepted(collector, "state_size", spec.state_size);
    let groups = accepted(collector, "num_groups", spec.num_groups.unwrap_or(8));
    let conv_kernel = accepted(collector, "conv_kernel", spec.conv_kernel.unwrap_or(4));
    let chunk_size = accepted(collector, "chunk_size", spec.chunk_size.unwrap_or(128));
    // The inner width (the x and z streams) and one of the B and C streams.
    for (what, first, second) in [
        ("inner width", ("mamba.num_heads", heads), ("mamba.head_dim", dim)),
        ("B or C stream width", ("mamba.num_groups", groups), ("mamba.state_size", state)),
    ] {
        if let ((first_key, Some(first)), (second_key, Some(second))) = (first, second) {
            let factors = [(first_key, first), (second_key, second)];
            super::bounds::check_width(collector, what, factors[1], &factors);
        }
    }
    if let (Some(heads), Some(groups)) = (heads, groups)
        && !heads.is_multiple_of(groups)
    {
        collector.add(
            "model.mamba.num_groups",
            groups,
            format!("does not divide num_heads {heads}"),
            "each group of B and C serves a whole number of heads",
        );
    }
    Mamba {
        num_heads: heads.unwrap_or(1),
        head_dim: dim.unwrap_or(1),
        state_size: state.unwrap_or(1),
        num_groups: groups.unwrap_or(1),
        conv_kernel: conv_kernel.unwrap_or(1),
        chunk_size: chunk_size.unwrap_or(1),
        gated_norm: spec.gated_norm.unwrap_or(true),
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Model, ModelSpec, MoeSpec, Sublayer};
    use crate::presets;

    fn nano() -> ModelSpec {
        presets::model("nemotron-3-nano").unwrap()
    }

    fn problems(spec: &ModelSpec) -> Vec<String> {
        let errors = Model::from_spec(spec).unwrap_err();
        assert!(errors.list().iter().all(|v| !v.hint.is_empty()));
        errors.list().iter().map(|v| format!("{} = {}: {}", v.field, v.value, v.message)).collect()
    }

    #[test]
    fn a_pattern_is_checked_symbol_by_symbol_against_the_rest_of_the_model() {
        let mut bad = nano();
        bad.hybrid_pattern = Some("MEX*".into());
        bad.num_layers = 5;
        bad.mamba = None;
        let found = problems(&bad);
        for expected in [
            "model.hybrid_pattern = MEX*: has the unknown symbol `X` at layer 2",
            "model.mamba = (unset): is required by the pattern's M layers",
        ] {
            assert!(found.iter().any(|f| f == expected), "{expected} not in {found:?}");
        }
        let mut counted = nano();
        counted.num_layers = 50;
        assert!(
            problems(&counted).iter().any(|f| f.contains("differs from the pattern's 52 layers"))
        );
        let mut no_experts = nano();
        no_experts.moe = None;
        assert!(problems(&no_experts).iter().any(|f| f.starts_with("model.moe = (unset)")));
        let mut stray = presets::model("llama3.1-8b").unwrap();
        stray.mamba = nano().mamba;
        assert!(problems(&stray).iter().any(|f| f.contains("needs a hybrid_pattern")));
        let mut groups = nano();
        groups.mamba.as_mut().unwrap().num_groups = Some(7);
        assert!(problems(&groups).iter().any(|f| f.contains("does not divide num_heads 64")));
    }

    #[test]
    fn attention_and_mlp_pairs_are_the_plain_transformer() {
        let plain = presets::model("llama3.1-8b").unwrap();
        let paired =
            ModelSpec { num_layers: 64, hybrid_pattern: Some("*-".repeat(32)), ..plain.clone() };
        assert_eq!(Model::from_spec(&paired).unwrap(), Model::from_spec(&plain).unwrap());
        let qwen = presets::model("qwen3-30b-a3b").unwrap();
        let experts =
            ModelSpec { num_layers: 96, hybrid_pattern: Some("*E".repeat(48)), ..qwen.clone() };
        assert_eq!(Model::from_spec(&experts).unwrap(), Model::from_spec(&qwen).unwrap());
        // Out of order, the same layers are a hybrid.
        let reordered =
            ModelSpec { hybrid_pattern: Some("**".to_owned() + &"-*".repeat(30) + "--"), ..paired };
        let hybrid = Model::from_spec(&reordered).unwrap();
        assert_eq!(hybrid.hybrid().unwrap().counts(), [0, 32, 32, 0, 0, 0, 0, 0]);
        assert_eq!(hybrid.num_layers(), 64);
    }

    #[test]
    fn mamba2_scan_flops_follow_the_kernels_count() {
        // Nemotron-H 8B (H 128, P 64, N 128, G 8, Q 128): H (4PN + QP) + 2GQN = 5.5M forward, and
        // the in- and out-projections 152M and 67M FLOPs per token (2 x 4096 x 18560, 2 x 8192 x
        // 4096).
        let model = Model::from_spec(&presets::model("nemotronh-8b").unwrap()).unwrap();
        let mamba = model.hybrid_mamba().unwrap();
        assert_eq!(
            mamba.scan_flops_per_token(),
            128.0 * (4.0 * 64.0 * 128.0 + 128.0 * 64.0) + 2.0 * 8.0 * 128.0 * 128.0
        );
        assert!((mamba.scan_flops_per_token() - 5.5e6).abs() < 0.05e6);
        let ratio = mamba.scan_backward_flops_per_token() / mamba.scan_flops_per_token();
        assert!((ratio - 2.6).abs() < 0.1, "{ratio}");
        assert_eq!(
            model.sublayer_gemm_flops_per_token(Sublayer::Mamba),
            2.0 * 4096.0 * (18560.0 + 8192.0)
        );
    }

    #[test]
    fn latent_experts_work_in_the_latent_width() {
        let super_ = Model::from_spec(&presets::model("nemotron-3-super").unwrap()).unwrap();
        assert_eq!(super_.expert_width(), 1024);
        assert_eq!(super_.expert_params(), 2 * 1024 * 2688);
        assert_eq!(super_.latent_projection_params(), 2 * 4096 * 1024);
        let mut spec = nano();
        spec.moe = Some(MoeSpec { latent_size: Some(0), ..spec.moe.unwrap() });
        assert!(problems(&spec).iter().any(|f| f.starts_with("model.moe.latent_size = 0")));
    }

    #[test]
    fn gated_delta_net_layers_need_their_table_and_whole_key_heads() {
        let mut qwen = presets::model("qwen3-next-80b-a3b").unwrap();
        let model = Model::from_spec(&qwen).unwrap();
        let linear = model.hybrid_linear_attention().unwrap();
        // 2 x 2048 (q, k) + 2 x 4096 (v, z) + 2 x 32 (beta, decay) out of 2048.
        assert_eq!(linear.in_projection(), 12352);
        assert_eq!(model.hybrid().unwrap().counts(), [0, 12, 0, 48, 36, 0, 0, 0]);
        qwen.linear_attention.as_mut().unwrap().num_value_heads = 24;
        assert!(problems(&qwen).iter().any(|f| f.contains("not a multiple of num_key_heads 16")));
        qwen.linear_attention = None;
        assert!(problems(&qwen).iter().any(|f| f.starts_with("model.linear_attention = (unset)")));
    }

    #[test]
    fn falcon_h1_layers_need_the_mamba_table() {
        let mut falcon = presets::model("falcon-h1-0.5b").unwrap();
        let model = Model::from_spec(&falcon).unwrap();
        assert_eq!(model.hybrid().unwrap().counts(), [0, 0, 0, 0, 0, 0, 36, 0]);
        assert_eq!(model.attention_layers(), 36);
        // A P layer's work is its Mamba-2 mixer's, its attention's and its MLP's.
        let parts: f64 = crate::model::PARALLEL_HYBRID_PARTS
            .iter()
            .map(|&kind| model.sublayer_gemm_flops_per_token(kind))
            .sum();
        assert_eq!(model.sublayer_gemm_flops_per_token(Sublayer::ParallelHybrid), parts);
        falcon.mamba = None;
        assert!(
            problems(&falcon)
                .iter()
                .any(|f| f == "model.mamba = (unset): is required by the pattern's P layers")
        );
    }

    #[test]
    fn mamba1_layers_need_their_table_and_positive_sizes() {
        let mut jamba = presets::model("jamba-v0.1").unwrap();
        let model = Model::from_spec(&jamba).unwrap();
        // 28 Mamba-1 and 4 attention mixers, 16 MLPs and 16 expert layers.
        assert_eq!(model.hybrid().unwrap().counts(), [0, 4, 16, 16, 0, 0, 0, 28]);
        let table = jamba.mamba1.take();
        assert!(
            problems(&jamba)
                .iter()
                .any(|f| f == "model.mamba1 = (unset): is required by the pattern's S layers")
        );
        let mut unused = nano();
        unused.mamba1 = table.clone();
        assert!(problems(&unused).iter().any(|f| f.contains("the pattern has no S layer")));
        let mut plain = presets::model("llama3.1-8b").unwrap();
        plain.mamba1 = table.clone();
        assert!(
            problems(&plain).iter().any(|f| f.contains("needs a hybrid_pattern placing its S"))
        );
        let mut zero = presets::model("jamba-v0.1").unwrap();
        zero.mamba1.as_mut().unwrap().inner_size = 0;
        zero.mamba1.as_mut().unwrap().dt_rank = -1;
        let found = problems(&zero);
        for expected in [
            "model.mamba1.inner_size = 0: must be a positive whole number",
            "model.mamba1.dt_rank = -1: must be a positive whole number",
        ] {
            assert!(found.iter().any(|f| f == expected), "{expected} not in {found:?}");
        }
    }

    #[test]
    fn lightning_attention_layers_need_their_table_and_no_other() {
        let mut minimax = presets::model("minimax-text-01").unwrap();
        let model = Model::from_spec(&minimax).unwrap();
        // Seven lightning layers then one softmax layer, ten times, each followed by experts.
        assert_eq!(model.hybrid().unwrap().counts(), [0, 10, 0, 80, 0, 70, 0, 0]);
        assert_eq!(model.hybrid_lightning_attention().unwrap().width(), 8192);
        let table = minimax.lightning_attention.take();
        assert!(
            problems(&minimax).iter().any(|f| f.starts_with("model.lightning_attention = (unset)"))
        );
        let mut plain = presets::model("mixtral-8x7b").unwrap();
        plain.lightning_attention = table.clone();
        assert!(
            problems(&plain).iter().any(|f| f.contains("needs a hybrid_pattern placing its L"))
        );
        let mut unused = nano();
        unused.lightning_attention = table;
        assert!(problems(&unused).iter().any(|f| f.contains("the pattern has no L layer")));
        let mut zero = presets::model("minimax-text-01").unwrap();
        zero.lightning_attention.as_mut().unwrap().block_size = Some(0);
        assert!(
            problems(&zero)
                .iter()
                .any(|f| f.starts_with("model.lightning_attention.block_size = 0"))
        );
    }
}
