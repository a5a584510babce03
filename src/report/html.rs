//! The report page: `template.html` filled with the header (inputs and key numbers), one section
//! per chart and the rejection table. Every text from outside this file is escaped; the charts are
//! plotters' SVG, inlined as is.

use std::fmt::Write as _;

use html_escape::encode_text as escape;

use super::data_charts::{self, check_finite, replicas_text, seconds_text};
use super::{
    ComparisonView, DataView, PlanView, Report, ReportError, SearchView, charts, scatter, timeline,
};
use crate::data::Batching;

const TEMPLATE: &str = include_str!("template.html");

/// Replaces each `{{name}}` of `template` with its value, in one pass (a value that contains
/// `{{` is not filled again).
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + values.iter().map(|v| v.1.len()).sum::<usize>());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let value = after.find("}}").and_then(|close| {
            let name = &after[..close];
            values.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value, close))
        });
        match value {
            Some((value, close)) => {
                out.push_str(value);
                rest = &after[close + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// How a chart sits in its section.
struct Chart<'a> {
    /// The `data-chart` value and, prefixed with `chart-`, the element id.
    name: &'a str,
    heading: &'a str,
    svg: String,
    caption: &'a str,
    /// Whether the chart may be wider than the page and scroll.
    scroll: bool,
}

/// A chart in its section, followed by `after` (markup, already escaped).
fn section(out: &mut String, chart: Chart, after: &str) {
    let Chart { name, heading, svg, caption, scroll } = chart;
    let class = if scroll { r#" class="scroll""# } else { "" };
    let _ = write!(
        out,
        "<section id=\"{name}\">\n<h2>{}</h2>\n<figure id=\"chart-{name}\" data-chart=\"{name}\"{class}>\n{svg}</figure>\n",
        escape(heading)
    );
    if !caption.is_empty() {
        let _ = writeln!(out, "<figcaption>{}</figcaption>", escape(caption));
    }
    out.push_str(after);
    out.push_str("</section>\n");
}

fn number(out: &mut String, value: &str, name: &str) {
    let _ = writeln!(
        out,
        "<li><span class=\"value\">{}</span><span class=\"name\">{}</span></li>",
        escape(value),
        escape(name)
    );
}

fn header(out: &mut String, report: &Report) {
    let _ = writeln!(out, "<header>\n<h1>{}</h1>", escape(&report.title));
    if let Some(plan) = &report.plan {
        let _ = writeln!(out, "<p class=\"subtitle\">{}</p>", escape(&plan.label));
    }
    out.push_str("<table class=\"inputs\">\n");
    for (name, value) in &report.inputs {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(name), escape(value));
    }
    out.push_str("</table>\n");
    match (&report.plan, &report.search) {
        (Some(plan), _) => key_numbers(out, plan),
        (None, Some(search)) => match &search.model_refused {
            Some(why) => {
                let _ = writeln!(out, "<p class=\"warning\">{}</p>", escape(why));
            }
            None => {
                out.push_str("<p class=\"warning\">No plan fits: see the rejections below.</p>\n")
            }
        },
        (None, None) => {}
    }
    out.push_str("</header>\n");
}

fn key_numbers(out: &mut String, plan: &PlanView) {
    let e = &plan.estimate;
    let peak = e.peak_memory.breakdown.total().as_gib();
    let capacity = e.memory_capacity.as_gib();
    out.push_str("<ul class=\"numbers\">\n");
    number(out, &format!("{:.3} s", e.time.step_time().value()), "step time (simulated)");
    number(out, &format!("{:.1}", e.throughput.tokens_per_sec_per_gpu), "tokens/s per GPU");
    number(out, &format!("{:.1} %", e.throughput.mfu_pct), "MFU");
    number(
        out,
        &format!("{:.1} TFLOP/s", e.throughput.model_tflops_per_gpu),
        "model FLOP/s per GPU",
    );
    number(
        out,
        &format!("{peak:.1} GiB"),
        &format!("peak memory (stage {}) of {capacity:.1} GiB", e.peak_memory.stage),
    );
    out.push_str("</ul>\n");
    if !e.fits_on_gpu() {
        let _ = writeln!(
            out,
            "<p class=\"warning\">Does not fit: {:.1} GiB over the GPU's memory.</p>",
            peak - capacity
        );
    }
    if let Some(host) = e.host_memory.filter(|host| !host.fits())
        && let Some(available) = host.capacity
    {
        let _ = writeln!(
            out,
            "<p class=\"warning\">Does not fit: its offloaded activations take {:.1} GiB of host \
             memory per GPU, {:.1} GiB over what the server gives each GPU.</p>",
            host.offloaded.as_gib(),
            host.offloaded.as_gib() - available.as_gib()
        );
    }
}

fn plan_sections(out: &mut String, plan: &PlanView) -> Result<(), ReportError> {
    let e = &plan.estimate;
    let memory = Chart {
        name: "memory",
        heading: "Memory per GPU",
        svg: charts::memory(&e.stages, e.memory_capacity)?,
        caption: "Peak allocated memory of each pipeline stage under the simulated schedule, by \
                  what it holds, against the GPU's usable memory.",
        scroll: false,
    };
    section(out, memory, "");
    let time = Chart {
        name: "step-time",
        heading: "Step time",
        svg: charts::step_time(&e.time)?,
        caption: "Read on the stage that finishes last; exposed communication is the part not \
                  hidden under compute.",
        scroll: false,
    };
    let imbalance = match &plan.data {
        Some(data) => imbalance_text(e, data)?,
        None => String::new(),
    };
    section(out, time, &imbalance);
    if let Some(data) = &plan.data {
        data_sections(out, data)?;
    }
    let steps = Chart {
        name: "timeline",
        heading: "Pipeline timeline",
        svg: timeline::timeline(&plan.timeline)?,
        caption: "Each task is labelled with its kind and micro-batch, or its micro-batch alone \
                  where the slice is narrow. One pipeline stands for every tensor-, context- and \
                  data-parallel replica. Scroll sideways when the step is wider than the page.",
        scroll: true,
    };
    section(out, steps, "");
    Ok(())
}

/// What the data's imbalance adds to the step, and the mean and slowest replica of the step the
/// load chart draws, as a paragraph.
fn imbalance_text(e: &crate::Estimate, data: &DataView) -> Result<String, ReportError> {
    let loads = &data.loads;
    let (slowest, slowest_load) = loads.slowest();
    let mean = loads.mean().value();
    let mut text = String::new();
    if let Some(balance) = &e.data_balance {
        let added = e.time.data_imbalance.value();
        let ratios = [("a replica's ratio", balance.replicas), ("a ratio", balance.microbatches)];
        check_finite("step-time", [("the imbalance", added)].into_iter().chain(ratios))?;
        let _ = write!(
            text,
            "Data imbalance {}: the slowest of {} does x{:.3} the mean replica's work, and a \
             replica's largest of {} micro-batches x{:.3} the mean micro-batch's (WLB-LLM's \
             imbalance degree). ",
            seconds_text(added),
            replicas_text(loads.replicas),
            balance.replicas,
            data.microbatches,
            balance.microbatches
        );
    }
    check_finite("replica-loads", [("the mean", mean), ("the slowest", slowest_load.value())])?;
    let _ = write!(
        text,
        "In the step drawn below, the replicas' critical stages work {} on average and {} at the \
         slowest (replica {slowest}).",
        seconds_text(mean),
        seconds_text(slowest_load.value())
    );
    Ok(format!("<p>{}</p>\n", escape(&text)))
}

/// The data's charts: its document lengths and one step's work per replica.
fn data_sections(out: &mut String, data: &DataView) -> Result<(), ReportError> {
    let batching = match data.batching {
        Batching::Pack => format!("packed into {}-token sequences", data.seq_len),
        Batching::Pad if data.variable_micro_batches => format!(
            "one document per sequence, sorted by length into variable micro-batches padded to \
             their longest document (documents cut at {} tokens)",
            data.seq_len
        ),
        Batching::Pad => format!("one document per {}-token sequence, padded", data.seq_len),
        Batching::Whole => {
            format!("whole documents packed into {}-token sequences, padded", data.seq_len)
        }
        Batching::Concat => format!(
            "concatenated into {}-token sequences with no document mask (every sequence costs a \
             full one)",
            data.seq_len
        ),
    };
    check_finite("lengths", [("the mean", data.mean_length), ("a share", data.long_token_share)])?;
    let mut caption = format!(
        "Mean document {:.0} tokens; {:.1} % of the tokens are in documents longer than {} \
         tokens (half the sequence); {batching}.",
        data.mean_length,
        100.0 * data.long_token_share,
        data.seq_len / 2
    );
    if let Some((granularity, share)) = data.context_parallel_padding {
        check_finite("padding", [("the share", share)])?;
        caption += &format!(
            " Context parallelism pads each document to a multiple of {granularity} tokens: \
             {:.2} % of the tokens are documents' own.",
            100.0 * share
        );
    }
    if let Some(refusal) = &data.engine_refusal {
        caption += &format!(" {refusal}.");
    }
    let lengths = Chart {
        name: "lengths",
        heading: "Document lengths",
        svg: data_charts::lengths(data)?,
        caption: &caption,
        scroll: false,
    };
    section(out, lengths, "");
    let caption = loads_caption(data);
    let loads = Chart {
        name: "replica-loads",
        heading: "Work per replica",
        svg: data_charts::replica_loads(&data.loads)?,
        caption: &caption,
        scroll: false,
    };
    section(out, loads, "");
    Ok(())
}

/// How the load chart's step was drawn, what the estimate prices beside it, and which replicas
/// the chart leaves out.
fn loads_caption(data: &DataView) -> String {
    let loads = &data.loads;
    let mean = seconds_text(loads.priced_mean.value());
    let slowest = seconds_text(loads.priced_slowest.value());
    let mut caption = match (loads.repacked, loads.window_slowest) {
        (false, _) => format!(
            "Each replica's {} x {} sequences drawn from the data's sample (seed {}) and priced \
             on the critical stage as the estimate prices a sequence. The estimate prices the \
             mean replica at {mean} and the slowest of {} at {slowest}, expected over steps.",
            data.microbatches,
            data.micro_batch,
            data.seed,
            replicas_text(loads.replicas)
        ),
        (true, Some([lightest, heaviest])) => format!(
            "The median step (by its slowest replica) of a window of {} global batches re-packed \
             by work, priced on the critical stage as the estimate prices a micro-batch. The \
             window's steps are slowest at {} to {}; the estimate prices the mean replica at \
             {mean} and the slowest of {} at {slowest}, averaged over the window's steps.",
            data.balance_window,
            seconds_text(lightest.value()),
            seconds_text(heaviest.value()),
            replicas_text(loads.replicas)
        ),
        (true, None) => format!(
            "Re-packed micro-batches hold more document pieces than are dealt at once: taken as \
             balanced, every replica at the mean the estimate prices, {mean}."
        ),
    };
    let drawn = data_charts::drawn_replicas(loads);
    if drawn.len() < loads.loads.len() {
        let shown: Vec<usize> = drawn.iter().map(|&(replica, _)| replica).collect();
        let rest = loads.loads.iter().enumerate().filter(|(replica, _)| !shown.contains(replica));
        let (low, high) = rest
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), (_, load)| {
                (low.min(load.value()), high.max(load.value()))
            });
        // The slowest is drawn in place of the last of the first replicas when it is not one.
        let first = if loads.slowest().0 < drawn.len() {
            format!("the first {} replicas, the slowest among them", drawn.len())
        } else {
            format!("the first {} replicas and the slowest", drawn.len() - 1)
        };
        let _ = write!(
            caption,
            " Drawn: {first}; the other {} do {} to {}.",
            loads.loads.len() - drawn.len(),
            seconds_text(low),
            seconds_text(high)
        );
    } else if (loads.loads.len() as u64) < loads.replicas {
        let _ = write!(
            caption,
            " The dealt window holds {} of the step's {}.",
            loads.loads.len(),
            replicas_text(loads.replicas)
        );
    }
    caption
}

/// A table of text cells under a header row; cells after the first `text_columns` are numbers.
fn table(class: &str, header: &[&str], rows: &[Vec<String>], text_columns: usize) -> String {
    let mut out = format!("<table class=\"{class}\">\n<tr>");
    for name in header {
        let _ = write!(out, "<th>{}</th>", escape(name));
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for (column, cell) in row.iter().enumerate() {
            let class = if column < text_columns { "" } else { " class=\"number\"" };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// The search's top list as a table.
fn top_list(out: &mut String, search: &SearchView) {
    if search.top.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = search
        .top
        .iter()
        .enumerate()
        .map(|(rank, row)| {
            vec![
                (rank + 1).to_string(),
                row.label.clone(),
                row.equivalents.join("; "),
                format!("{:.3}", row.step_time.value()),
                format!("{:.1}", row.tokens_per_sec_per_gpu),
                format!("{:.1}", row.mfu_pct),
                format!("{:.1}", row.peak_memory.as_gib()),
            ]
        })
        .collect();
    let header =
        ["#", "plan", "also (same time and memory)", "step s", "tokens/s/GPU", "MFU %", "peak GiB"];
    let _ = write!(
        out,
        "<section id=\"top\">\n<h2>Best plans</h2>\n{}<p class=\"caption\">{}</p>\n</section>\n",
        table("top", &header, &rows, 3),
        escape(
            "Ranked by simulated step time (per token trained where context parallelism pads \
             documents), then peak memory. Plans with the same step time and peak are one entry; \
             the others are listed as the flags that turn the entry into them."
        )
    );
}

fn search_sections(
    out: &mut String,
    search: &SearchView,
    best_label: &str,
) -> Result<(), ReportError> {
    top_list(out, search);
    let caption = format!(
        "{} candidates considered, {} priced and fitting by the closed form: {} simulated, {} \
         pruned because their lower bound could not beat the best plans (drawn at the \
         throughput that bound allows). Points that would overlap are drawn once.",
        search.considered, search.priced, search.simulated, search.pruned
    );
    if search.points.is_empty() {
        let _ = writeln!(
            out,
            "<section id=\"scatter\">\n<h2>Candidates</h2>\n<p>{}</p>\n</section>",
            escape(&format!(
                "No candidate was priced and fits: all {} candidates were rejected.",
                search.considered
            ))
        );
    } else {
        let candidates = Chart {
            name: "scatter",
            heading: "Candidates: throughput vs peak memory",
            svg: scatter::scatter(search, best_label)?,
            caption: &caption,
            scroll: false,
        };
        section(out, candidates, "");
    }
    let mut table = String::from(
        "<table class=\"rejections\">\n<tr><th>rejected because</th><th>candidates</th>\
         <th>example</th></tr>\n",
    );
    for row in &search.rejections {
        let _ = writeln!(
            table,
            "<tr><td>{}</td><td class=\"number\">{}</td><td>{}</td></tr>",
            escape(row.reason),
            row.count,
            escape(&row.example)
        );
    }
    table.push_str("</table>\n");
    let rejected = Chart {
        name: "rejections",
        heading: "Rejected candidates",
        svg: charts::rejections(&search.rejections)?,
        caption: "",
        scroll: false,
    };
    section(out, rejected, &table);
    Ok(())
}

/// Plans side by side: the figures, what differs, and each plan's memory and step-time charts.
fn comparison_sections(out: &mut String, view: &ComparisonView) -> Result<(), ReportError> {
    let mut header = vec![""];
    header.extend(view.columns.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = view
        .rows
        .iter()
        .map(|(name, values)| std::iter::once(name.clone()).chain(values.clone()).collect())
        .collect();
    let _ = write!(
        out,
        "<section id=\"side-by-side\">\n<h2>Side by side</h2>\n{}</section>\n",
        table("comparison", &header, &rows, 1)
    );
    header[0] = "option";
    let differences: Vec<Vec<String>> = view
        .differences
        .iter()
        .map(|(key, values)| std::iter::once(key.clone()).chain(values.clone()).collect())
        .collect();
    let listed = if differences.is_empty() {
        "<p>The plans set every option alike.</p>\n".to_owned()
    } else {
        table("differences", &header, &differences, header.len())
    };
    let _ =
        write!(out, "<section id=\"differences\">\n<h2>What differs</h2>\n{listed}</section>\n");
    for (index, (label, estimate)) in view.plans.iter().enumerate() {
        let column = view.columns.get(index).map_or("", String::as_str);
        let memory = Chart {
            name: &format!("memory-{}", index + 1),
            heading: &format!("{column}: memory per GPU ({label})"),
            svg: charts::memory(&estimate.stages, estimate.memory_capacity)?,
            caption: "",
            scroll: false,
        };
        section(out, memory, "");
        let time = Chart {
            name: &format!("step-time-{}", index + 1),
            heading: &format!("{column}: step time"),
            svg: charts::step_time(&estimate.time)?,
            caption: "",
            scroll: false,
        };
        section(out, time, "");
    }
    Ok(())
}

/// The whole run: the waterfall of the time to train and the figures behind it.
fn whole_run_section(
    out: &mut String,
    outlook: &crate::goodput::RunOutlook,
) -> Result<(), ReportError> {
    let ckpt = &outlook.checkpoint;
    let mut facts = format!(
        "<p>{:.2}T tokens in {} steps; {:.0} failures expected (job MTTF {:.2} h on {} nodes at \
         {:.2} per 1000 node-days); a {:.2} TB {} checkpoint every {:.1} min blocks {:.2} s and \
         loads in {:.1} s; a restart takes {:.1} min; {:.3}M GPU-hours",
        outlook.tokens / 1e12,
        outlook.steps,
        outlook.failures,
        outlook.mttf.value() / 3600.0,
        outlook.nodes,
        1000.0 * outlook.failures_per_node_day,
        ckpt.total.value() / 1e12,
        ckpt.mode.name(),
        outlook.interval.value() / 60.0,
        ckpt.blocking.value(),
        ckpt.load.value(),
        outlook.restart.value() / 60.0,
        outlook.gpu_hours / 1e6,
    );
    if let Some(cost) = outlook.cost {
        let _ = write!(facts, ", ${:.2}M", cost / 1e6);
    }
    if let Some(mwh) = outlook.energy_mwh {
        let _ = write!(facts, ", {mwh:.0} MWh (GPU board power only)");
    }
    facts.push_str(".</p>\n");
    let chart = Chart {
        name: "whole-run",
        heading: "Whole run",
        svg: super::whole_run::waterfall(outlook)?,
        caption: "Expected wall-clock time to train under Poisson failures: the training steps, \
                  the work lost since the last checkpoint at each failure, the time checkpoints \
                  block training, and the restarts (checkpoint load included).",
        scroll: false,
    };
    section(out, chart, &facts);
    Ok(())
}

/// The whole page.
pub(super) fn page(report: &Report) -> Result<String, ReportError> {
    let mut body = String::new();
    header(&mut body, report);
    if let Some(plan) = &report.plan {
        plan_sections(&mut body, plan)?;
    }
    if let Some((outlook, _)) = &report.whole_run {
        whole_run_section(&mut body, outlook)?;
    }
    if let Some((_, Some(drawn))) = &report.whole_run {
        let chart = Chart {
            name: "run-timeline",
            heading: "One drawn run",
            svg: super::whole_run::run_timeline(drawn)?,
            caption: "One run drawn failure by failure (simulate's --seed): each failure loses the \
                      work since the last checkpoint (orange, before the line) and restarts (purple, \
                      after it, each drawn at least a pixel wide); the green is training. Checkpoints \
                      are too frequent to draw.",
            scroll: false,
        };
        section(&mut body, chart, "");
    }
    if let Some(search) = &report.search {
        let best = report.plan.as_ref().map_or("", |plan| plan.label.as_str());
        search_sections(&mut body, search, best)?;
    }
    if let Some(comparison) = &report.comparison {
        comparison_sections(&mut body, comparison)?;
    }
    Ok(fill(TEMPLATE, &[("title", &escape(&report.title)), ("body", &body)]))
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn placeholders_are_filled_once_and_unknown_ones_are_kept() {
        let filled = fill("<p>{{a}} {{b}} {{c}}</p>", &[("a", "{{b}}"), ("b", "x")]);
        assert_eq!(filled, "<p>{{b}} x {{c}}</p>");
    }
}
