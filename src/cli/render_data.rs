//! The text and JSON that describe a run's data (`--lengths`, `--batching`): its one-line
//! label, the `Data imbalance` line of an estimate, and the `data` object of its JSON.

use serde::Serialize;

use crate::Estimate;
use crate::cost::imbalance::VariableMicroBatches;
use crate::plan::Plan;

/// What a run's data is and how it is batched, in one line.
pub(super) fn data_label(run: &crate::Run, data: &crate::run::RunData) -> String {
    let seq_len = run.training().seq_len();
    let name = data.data.name();
    let distribution = data.data.distribution();
    let batching = match data.data.batching() {
        crate::data::Batching::Pack => format!(
            "packed into {seq_len}-token sequences ({:.1} document pieces each on average)",
            data.loads.pieces_per_sequence
        ),
        crate::data::Batching::Pad => match run.dynamic_batches() {
            Some(made) => match made.get() {
                Some(batches) => {
                    let micro_batch = run.training().micro_batch();
                    format!(
                        "one document per sequence, sorted by length into variable micro-batches \
                         of up to {} padded tokens ({:.1} a global batch on average against {} \
                         fixed ones, {:.1} % of the tokens computed trained)",
                        micro_batch * seq_len,
                        batches.micro_batches,
                        run.training().global_batch() / micro_batch,
                        100.0 * batches.trained_fraction
                            / batches.computed_fraction.max(f64::MIN_POSITIVE)
                    )
                }
                None => "one document per sequence, sorted by length into variable micro-batches"
                    .to_owned(),
            },
            None => format!(
                "one document per {seq_len}-token sequence, padded ({:.1} % of tokens trained)",
                data.loads.trained_fraction * 100.0
            ),
        },
        crate::data::Batching::Whole => format!(
            "whole documents packed into {seq_len}-token sequences, the rest padded ({:.1} \
             documents each on average, {:.1} % of tokens trained)",
            data.loads.pieces_per_sequence,
            data.loads.trained_fraction * 100.0
        ),
        crate::data::Batching::Concat => format!(
            "concatenated into {seq_len}-token sequences with no document mask ({:.1} document \
             pieces each on average, each sequence attending as one full one)",
            data.loads.pieces_per_sequence
        ),
    };
    let unpadded = run.context_parallel_padding();
    let padding = if unpadded < 1.0 {
        format!(
            "; each document padded to a multiple of {} tokens for context parallelism (2 x cp), \
             {:.2} % of the tokens documents' own",
            run.context_parallel_granularity(),
            unpadded * 100.0
        )
    } else {
        String::new()
    };
    let sampled = match run.dynamic_batches() {
        Some(made) => match made.get() {
            Some(batches) => format!(
                "{} global batches of {} documents drawn",
                batches.global_batches.len(),
                batches.drawn
            ),
            None => "no global batch drawn".to_owned(),
        },
        None => format!("{} sequences sampled", data.loads.sequences),
    };
    format!(
        "{name}, mean document {:.0} tokens, up to {}; {batching}{padding}; {sampled}, seed {}",
        distribution.mean_length(),
        distribution.max_length(),
        data.data.seed()
    )
}

/// The line under the data's when the plan's engine batches documents no way the data is
/// batched: its export refuses the plan, and says why.
pub(super) fn batching_refusal_line(run: &crate::Run) -> Option<String> {
    Some(format!("Engine: {}", crate::export::data_refusal_sentence(run)?))
}

/// The `Data imbalance` line of an estimate with data: what the slowest replica (or rank) and
/// the largest micro-batch take beyond the mean.
pub(super) fn data_imbalance_line(plan: &Plan, estimate: &Estimate) -> Option<String> {
    let balance = estimate.data_balance.as_ref()?;
    let name = "Data imbalance";
    Some(match (plan.hybrid_cp(), balance.variable) {
        (Some(hybrid), _) => format!(
            "{name:<22} slowest of {} ranks x{:.3} the mean rank's work, each document on a \
             context-parallel group of up to {} tokens a rank",
            plan.dp() * plan.cp(),
            balance.replicas,
            hybrid.max_tokens_per_rank(),
        ),
        (None, Some(variable)) => format!(
            "{name:<22} slowest of {} replicas x{:.3} the mean replica's work; largest of {:.1} \
             variable micro-batches a replica x{:.3} the mean, its pipeline fill and drain {:.1} \
             ms longer",
            plan.dp(),
            balance.replicas,
            variable.per_replica,
            balance.microbatches,
            variable.largest_fill.value() * 1e3,
        ),
        (None, None) => format!(
            "{name:<22} slowest of {} replicas x{:.3} the mean replica's work; largest of {} \
             micro-batches x{:.3} the mean (WLB-LLM's imbalance degree)",
            plan.dp(),
            balance.replicas,
            plan.num_microbatches(),
            balance.microbatches,
        ),
    })
}

/// A run's data and what its unequal sequences cost.
#[derive(Serialize)]
pub(super) struct DataJson {
    /// The built-in distribution's name, or the lengths' source.
    lengths: String,
    batching: &'static str,
    mean_document_tokens: f64,
    /// The longest length the distribution can draw (a histogram's last bin's end).
    longest_document_tokens: u64,
    pieces_per_sequence: f64,
    /// Tokens trained over tokens computed (below 1 when padding, context parallelism's
    /// included).
    trained_fraction: f64,
    /// The share of the tokens that are documents' own, not the padding each gets to a multiple
    /// of 2 x cp tokens for context parallelism (1 without it).
    context_parallel_unpadded: f64,
    sequences_sampled: u64,
    seed: u64,
    /// The slowest data-parallel replica's work over the mean replica's.
    slowest_replica_over_mean: f64,
    /// A replica's largest micro-batch's work over the mean micro-batch's.
    largest_microbatch_over_mean: f64,
    /// What the imbalance adds to the step (the time breakdown's `data_imbalance`).
    imbalance_s: f64,
    /// Whether a loader of the plan's engine batches the data so (else its export refuses the
    /// plan, `Refusal::DocumentBatching`).
    engine_batches_it: bool,
    /// With variable micro-batches (a plan's `variable_micro_batches`): how many a replica runs
    /// and what their largest adds to the pipeline's fill and drain.
    #[serde(skip_serializing_if = "Option::is_none")]
    variable_microbatches: Option<VariableMicroBatches>,
}

impl DataJson {
    pub(super) fn of(run: &crate::Run, estimate: &Estimate) -> Option<DataJson> {
        let (data, balance) = (run.data()?, estimate.data_balance?);
        let distribution = data.data.distribution();
        Some(DataJson {
            lengths: data.data.name().to_owned(),
            batching: data.data.batching().name(),
            mean_document_tokens: distribution.mean_length(),
            longest_document_tokens: distribution.max_length(),
            pieces_per_sequence: data.loads.pieces_per_sequence,
            trained_fraction: run.trained_fraction(),
            context_parallel_unpadded: run.context_parallel_padding(),
            sequences_sampled: data.loads.sequences,
            seed: data.data.seed(),
            slowest_replica_over_mean: balance.replicas,
            largest_microbatch_over_mean: balance.microbatches,
            imbalance_s: estimate.time.data_imbalance.value(),
            engine_batches_it: crate::export::data_refusal(run).is_none(),
            variable_microbatches: balance.variable,
        })
    }
}
