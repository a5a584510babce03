//! The bounds every count a user gives is checked against at the edge, with the bound named in
//! the error's hint: past them the arithmetic inside could overflow, or the work (one entry per
//! layer, one task per micro-batch and stage) would grow with a typed number until the program
//! hangs or runs out of memory. Each bound sits far above any published model or cluster.

/// GPUs in one job: 2^20, over ten times the largest published training clusters (about 100,000).
pub const GPUS: u64 = 1 << 20;
/// A parallel size (tp, pp, cp, dp, ep, etp, a shard group): at most the GPUs.
pub const PARALLEL_SIZE: u64 = GPUS;
/// Virtual pipeline chunks per rank (at least one layer each).
pub const VIRTUAL_STAGES: u64 = LAYERS;
/// Transformer layers of a model: published models have at most a few hundred.
pub const LAYERS: u64 = 4096;
/// A width of a model (hidden size, FFN width, head width, latent ranks): 2^20. The widths a model
/// derives as products of its fields are held to it too (`model::bounds`): attention's queries
/// (heads x head width) and latent attention's key/value up-projection, Mamba-2's inner width
/// (heads x head width) and its B or C stream (groups x state), gated DeltaNet's keys and values,
/// the shared experts together (their count x the expert width). Published models stay below
/// 2^16 in each (Llama 3.1 405B's queries: 16,384; DeepSeek-V3's key/value up-projection: 32,768).
pub const WIDTH: u64 = 1 << 20;
/// Attention heads or key/value heads.
pub const HEADS: u64 = 1 << 16;
/// Vocabulary entries: 2^24, over 60 times the largest published vocabularies (about 256K).
pub const VOCAB: u64 = 1 << 24;
/// Routed or shared experts per MoE layer.
pub const EXPERTS: u64 = 1 << 16;
/// Parameters of a model, every layer, embedding, output layer and multi-token-prediction module
/// counted: 2^50, about 1.1 x 10^15, over 500 times the largest published models (about 2 x
/// 10^12). With every width (derived ones included) at most [`WIDTH`], one layer holds below
/// 2^59 parameters (2^16 experts of three 2^20 x 2^20 matrices), so each per-layer count is exact
/// in `u64`; what multiplies a per-layer count by layers or modules is part of this total, checked
/// in `u128` before a `Model` exists. Below 2^53, every count is exact in `f64`, where memory
/// (x bytes per parameter) and FLOPs (x 2^48 tokens per step at most) are figured: finite there.
pub const PARAMS: u64 = 1 << 50;
/// Tokens per sequence (and position embeddings): 2^24, above the 10M-token contexts published.
pub const SEQ_LEN: u64 = 1 << 24;
/// Entries of a document-length sample or histogram (`--lengths`): 2^24, a sample far larger
/// than any distribution needs (a million documents describe one to a percent).
pub const LENGTH_ENTRIES: u64 = 1 << 24;
/// Documents a histogram counts in all: 2^50, so that the counts add up within u64.
pub const DOCUMENTS: u64 = 1 << 50;
/// Global batches whose documents are re-packed together (`--balance-window`): WLB-LLM re-packs
/// over up to 8; 1024 is far past any benefit.
pub const BALANCE_WINDOW: u64 = 1024;
/// Ranks of a hybrid context-parallel pool (`dp x cp` with `--hybrid-cp`): 2^16, past ByteScale's
/// 12,000 GPUs. Placing documents keeps a load per rank and reorders the pool's groups at each
/// group size, and every plan prices every rank: a larger pool is refused.
pub const HYBRID_CP_RANKS: u64 = 1 << 16;
/// Sequences per optimizer step.
pub const GLOBAL_BATCH: u64 = 1 << 24;
/// Tasks of one simulated step (micro-batches x pipeline stages x virtual chunks x 2 phases):
/// 2^24 tasks take seconds; a step with more is refused rather than simulated for minutes.
pub const SIMULATED_TASKS: u64 = 1 << 24;
/// A routing ratio (`moe_imbalance`, the busiest rank's tokens over the mean, and
/// `moe_capacity_factor`): 1 to the expert bound, since no rank can take more than every token of
/// the experts it holds. Unbounded, a finite ratio such as 1e300 overflowed the times it scales.
pub const MOE_RATIO: (f64, f64) = (1.0, EXPERTS as f64);

/// Physical ranges (inclusive, in base units) of the hardware quantities a GPU or link file gives:
/// far outside any real part, and narrow enough that every figure derived from them is finite.
/// A link's latency per hop, in seconds.
pub const LATENCY_SECONDS: (f64, f64) = (0.0, 1.0);
/// A link's or memory's bandwidth, in bytes per second (1 MB/s to 1 PB/s).
pub const BANDWIDTH: (f64, f64) = (1e6, 1e15);
/// A GPU's memory, in bytes (1 GB to 100 TB).
pub const GPU_MEMORY: (f64, f64) = (1e9, 1e14);
/// Host memory of one server, bytes: 1 GB to 1 PB.
pub const HOST_MEMORY: (f64, f64) = (1e9, 1e15);
/// A GPU's peak rate, in FLOP/s (1 TFLOP/s to 1 EFLOP/s).
pub const PEAK_FLOPS: (f64, f64) = (1e12, 1e18);
/// A GPU's board power, in watts (10 W to 10 kW).
pub const GPU_POWER: (f64, f64) = (10.0, 1e4);

/// The bounds of a whole run (`--train-tokens` and the failure, checkpoint and price flags).
/// Training tokens: 10^16, a thousand times today's largest runs.
pub const TRAIN_TOKENS: f64 = 1e16;
/// Optimizer steps to train.
pub const TRAIN_STEPS: i64 = 10_000_000_000;
/// Failures per 1000 node-days: 1000, one per node a day, far above any published fleet.
pub const FAILURES_PER_1000_NODE_DAYS: f64 = 1000.0;
/// A whole run's durations (checkpoint interval, restart, repair), in seconds: 10^8, three years.
pub const RUN_DURATION_SECONDS: f64 = 1e8;
/// Checkpoint storage bandwidth, in bytes per second: 1 PB/s, as for any link.
pub const STORAGE_BANDWIDTH: f64 = BANDWIDTH.1;
/// Warm spare nodes.
pub const SPARE_NODES: i64 = 100_000;
/// Price of one GPU-hour, in dollars.
pub const PRICE_PER_GPU_HOUR: f64 = 1e4;
/// Whole runs `simulate` draws.
pub const DRAWN_RUNS: u64 = 100_000;
/// Failures the drawn runs draw in all (about a second of drawing): fewer runs are drawn when each
/// expects many failures, and none when one alone would pass it.
pub const DRAWN_FAILURES: f64 = 1e8;

/// Whether `value` lies in the inclusive `range`.
pub fn within(value: f64, (low, high): (f64, f64)) -> bool {
    value.is_finite() && (low..=high).contains(&value)
}

/// The bound of a model field (by its key in model files): the widths, unless named here.
pub fn model_field(field: &str) -> u64 {
    match field {
        "num_layers" | "moe.dense_layers" | "mtp_layers" => LAYERS,
        "num_attention_heads" | "num_kv_heads" => HEADS,
        "vocab_size" => VOCAB,
        "max_position_embeddings" | "sliding_window" => SEQ_LEN,
        "moe.num_experts" | "moe.top_k" | "moe.num_shared_experts" => EXPERTS,
        _ => WIDTH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_of_bounded_counts_stay_exact_in_u64_and_f64() {
        // The largest products the cost model forms: tokens per step, and a layer's weights.
        let tokens = SEQ_LEN * GLOBAL_BATCH;
        assert!(tokens <= 1 << 53, "exact in f64");
        assert!(WIDTH.checked_mul(WIDTH).and_then(|w| w.checked_mul(LAYERS)).is_some());
        assert!(PARALLEL_SIZE.checked_mul(PARALLEL_SIZE).is_some());
        // One MoE layer at the width bounds: every expert's three matrices, and the MTP module
        // holding one (its 2h x h projection beside it), stay exact in u64 with room to add.
        let experts_of_one_layer = EXPERTS * 3 * WIDTH * WIDTH;
        assert!(experts_of_one_layer < 1 << 59);
        const { assert!(PARAMS < 1 << 53, "every parameter count exact in f64") };
        assert!((PARAMS as f64 * 20.0 * tokens as f64).is_finite());
    }

    #[test]
    fn the_routing_ratio_bound_is_the_expert_bound_the_errors_name() {
        // `run::rules` names this bound in words ("from 1 to 65536").
        assert_eq!(MOE_RATIO, (1.0, 65536.0));
        assert!(within(65536.0, MOE_RATIO) && !within(65536.5, MOE_RATIO));
        assert!(!within(0.99, MOE_RATIO) && !within(f64::INFINITY, MOE_RATIO));
    }
}
