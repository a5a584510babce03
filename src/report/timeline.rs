//! The pipeline timeline chart: every stage's compute lane (forward, backward, input- and
//! weight-gradient tasks labelled with their micro-batch, and the optimizer step), its pipeline
//! sends and its data-parallel collectives over the simulated step.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::charts::{
    CAPTION, FONT, GREY, LABEL, Mark, categories, category, mesh_style, rgb, svg, swatch, text,
};
use super::{ReportError, Timeline};
use crate::sim::{Lane, SliceKind, TaskKind};

/// Pixels the median compute task gets, so that its micro-batch number fits.
const TASK_PIXELS: f64 = 24.0;
/// Width bounds of the chart; wider ones scroll inside the page.
const WIDTH: (f64, f64) = (1000.0, 24_000.0);
/// Pixels of the lane labels left of the plot.
const LABEL_AREA: u32 = 130;
/// Height of one lane.
const LANE_PIXELS: u32 = 30;
/// Narrowest slice drawn, in pixels.
const MIN_PIXELS: f64 = 2.0;
/// Approximate width of one label character at the task label size.
const CHAR_PIXELS: f64 = 7.5;

/// What a slice is drawn as: legend name, fill and the colour of its label.
fn style(kind: &SliceKind) -> (&'static str, u32, RGBColor) {
    match kind {
        SliceKind::Task(task) => match task.kind {
            TaskKind::Forward => ("F forward", 0x4e_79a7, WHITE),
            TaskKind::Backward => ("B backward", 0xf2_8e2b, BLACK),
            TaskKind::BackwardInput => ("I input gradient", 0xed_c948, BLACK),
            TaskKind::WeightGradient => ("W weight gradient", 0xb0_7aa1, WHITE),
        },
        SliceKind::Optimizer => ("optimizer step", 0x9c_755f, WHITE),
        SliceKind::Send(_) => ("pp send", 0x59_a14f, WHITE),
        SliceKind::ParamGather { .. } => ("dp param all-gather", 0x76_b7b2, BLACK),
        SliceKind::GradientReduce { .. } => ("dp grad reduce", 0xe1_5759, WHITE),
    }
}

/// The lanes shown, top to bottom: each rank's compute, then its sends and collectives if any.
fn lanes(timeline: &Timeline) -> Vec<(u32, Lane)> {
    let used = |lane: Lane| timeline.slices.iter().any(|s| s.lane == lane);
    let (sends, collectives) = (used(Lane::PipelineSend), used(Lane::DataParallel));
    let mut lanes = Vec::new();
    for rank in 0..timeline.ranks {
        lanes.push((rank, Lane::Compute));
        if sends {
            lanes.push((rank, Lane::PipelineSend));
        }
        if collectives {
            lanes.push((rank, Lane::DataParallel));
        }
    }
    lanes
}

fn lane_name(rank: u32, lane: Lane) -> String {
    match lane {
        Lane::Compute => format!("stage {rank} compute"),
        Lane::PipelineSend => "pp send".to_owned(),
        Lane::DataParallel => "dp collectives".to_owned(),
    }
}

/// Plot width in pixels: wide enough for the median compute task to show its micro-batch.
fn plot_width(timeline: &Timeline) -> f64 {
    let mut tasks: Vec<f64> = timeline
        .slices
        .iter()
        .filter(|s| matches!(s.kind, SliceKind::Task(_)))
        .map(|s| (s.end - s.start).value())
        .collect();
    tasks.sort_by(f64::total_cmp);
    let step = timeline.step_time.value();
    match tasks.get(tasks.len() / 2) {
        Some(&median) if median > 0.0 && step > 0.0 => {
            (step / median * TASK_PIXELS).clamp(WIDTH.0, WIDTH.1)
        }
        _ => WIDTH.0,
    }
}

/// The timeline as an SVG chart.
pub(super) fn timeline(timeline: &Timeline) -> Result<String, ReportError> {
    let lanes = lanes(timeline);
    let rows = lanes.len();
    let row_of = |rank: u32, lane: Lane| {
        lanes.iter().position(|&l| l == (rank, lane)).map(|i| (rows - 1 - i) as f64)
    };
    let plot = plot_width(timeline);
    let step_ms = timeline.step_time.as_millis().max(1e-9);
    let pixels_per_ms = plot / step_ms;
    let width = plot as u32 + LABEL_AREA + 40;
    let legend_height = 70;
    let height = legend_height + 70 + LANE_PIXELS * rows as u32;
    let title = format!(
        "Pipeline timeline of the simulated step: {} micro-batches on {} pipeline stages",
        timeline.microbatches, timeline.ranks
    );
    svg("timeline", &title, (width, height), |root| {
        let (header, body) = root.split_vertically(legend_height);
        header.draw(&Text::new(title.clone(), (12, 8), (FONT, CAPTION).into_font()))?;
        // The legend: every kind of slice that occurs, in a fixed order.
        let mut kinds: Vec<(&str, u32, RGBColor)> = Vec::new();
        for slice in &timeline.slices {
            let entry = style(&slice.kind);
            if !kinds.contains(&entry) {
                kinds.push(entry);
            }
        }
        kinds.sort_by_key(|(name, _, _)| LEGEND_ORDER.iter().position(|n| n == name));
        let mut x = 12;
        for (name, hex, _) in &kinds {
            swatch(&header, (x, 49), Mark::Box(rgb(*hex)))?;
            header.draw(&Text::new(
                name.to_string(),
                (x + 20, 49),
                text(LABEL, BLACK, HPos::Left, VPos::Center),
            ))?;
            x += 34 + (name.len() as f64 * CHAR_PIXELS) as i32;
        }

        let mut chart = ChartBuilder::on(&body)
            .margin_right(50)
            .margin_left(8)
            .x_label_area_size(40)
            .y_label_area_size(LABEL_AREA)
            .build_cartesian_2d(0.0..step_ms, categories(rows))?;
        let mut mesh = chart.configure_mesh();
        mesh_style(&mut mesh);
        mesh.disable_y_mesh()
            .x_labels((plot / 110.0) as usize)
            .x_label_formatter(&|ms| format!("{ms:.0}"))
            .y_labels(rows)
            .y_label_formatter(&|v| {
                category(*v, rows).map_or(String::new(), |r| {
                    let (rank, lane) = lanes[rows - 1 - r];
                    lane_name(rank, lane)
                })
            })
            .x_desc("ms into the step")
            .draw()?;
        // A rule between stages.
        let rules = (1..timeline.ranks).filter_map(|rank| {
            let y = row_of(rank, Lane::Compute)? + 0.5;
            Some(PathElement::new(vec![(0.0, y), (step_ms, y)], GREY.mix(0.5)))
        });
        chart.draw_series(rules)?;
        let bars = timeline.slices.iter().filter_map(|s| {
            let y = row_of(s.rank, s.lane)?;
            let (_, hex, _) = style(&s.kind);
            let start = s.start.as_millis();
            // At least two pixels wide, so that short sends and collectives stay visible.
            let end = s.end.as_millis().max(start + MIN_PIXELS / pixels_per_ms);
            let mut bar = Rectangle::new([(start, y - 0.38), (end, y + 0.38)], rgb(hex).filled());
            // A pixel of gap between neighbouring slices that are wide enough to spare it.
            if (end - start) * pixels_per_ms >= 4.0 {
                bar.set_margin(0, 0, 0, 1);
            }
            Some(bar)
        });
        chart.draw_series(bars)?;
        let labels = timeline.slices.iter().filter_map(|s| {
            let SliceKind::Task(task) = s.kind else { return None };
            let y = row_of(s.rank, s.lane)?;
            let (_, _, ink) = style(&s.kind);
            let pixels = (s.end - s.start).as_millis() * pixels_per_ms;
            let long = format!("{}{}", task.kind.letter(), task.microbatch);
            let label = [long, task.microbatch.to_string()]
                .into_iter()
                .find(|l| l.len() as f64 * CHAR_PIXELS + 3.0 <= pixels)?;
            let middle = (s.start.as_millis() + s.end.as_millis()) / 2.0;
            Some(Text::new(label, (middle, y), text(13, ink, HPos::Center, VPos::Center)))
        });
        chart.draw_series(labels)?;
        Ok(())
    })
}

/// The order of the legend's entries.
const LEGEND_ORDER: [&str; 8] = [
    "F forward",
    "B backward",
    "I input gradient",
    "W weight gradient",
    "optimizer step",
    "pp send",
    "dp param all-gather",
    "dp grad reduce",
];
