//! The bar charts of a report (memory per pipeline stage against the GPU's capacity, the
//! step-time breakdown, rejected candidates by reason) and what every chart shares: the palette,
//! fonts, category axes and the SVG each chart is drawn into with plotters.

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{RejectionRow, ReportError};
use crate::estimate::{StageMemory, TimeBreakdown};
use crate::units::Bytes;

/// The font family of every label; the browser picks the face, so no font file is needed.
pub(super) const FONT: &str = "sans-serif";
/// Axis and legend labels.
pub(super) const LABEL: u32 = 15;
/// Chart captions.
pub(super) const CAPTION: u32 = 19;
/// Grey of axes and secondary text.
pub(super) const GREY: RGBColor = rgb(0x55_5555);
/// The capacity line and the highlighted plan.
pub(super) const ALERT: RGBColor = rgb(0xc0_1c28);

/// A drawing area of an SVG chart.
pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// What drawing on it returns.
pub(super) type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;
/// A category axis: category `i` sits at `i`, each a unit wide, with one tick per category.
#[derive(Debug, Clone, Copy)]
pub(super) struct Categories(usize);

impl Ranged for Categories {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = (value + 0.5) / self.0.max(1) as f64;
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Light grid lines between categories would be noise; every category is a bold point.
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        (0..self.0).map(|i| i as f64).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        -0.5..self.0.max(1) as f64 - 0.5
    }
}

/// A colour from its `0xrrggbb` value.
pub(super) const fn rgb(hex: u32) -> RGBColor {
    RGBColor((hex >> 16) as u8, (hex >> 8) as u8, hex as u8)
}

/// An axis of `count` categories, each a unit wide around its index.
pub(super) fn categories(count: usize) -> Categories {
    Categories(count)
}

/// The category whose tick is at `value`, if any.
pub(super) fn category(value: f64, count: usize) -> Option<usize> {
    let index = value.round();
    ((value - index).abs() < 1e-6 && index >= 0.0 && (index as usize) < count)
        .then_some(index as usize)
}

/// A text style of `size` in `color`, anchored at `h` and `v`.
pub(super) fn text(size: u32, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle {
        font: (FONT, size).into_font(),
        color: color.to_backend_color(),
        pos: Pos::new(h, v),
    }
}

/// How a legend entry is marked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Mark {
    /// A filled square, for bars and slices.
    Box(RGBColor),
    /// A line, for thresholds.
    Line(RGBColor),
}

/// A legend as a column of entries in `area`, from `top` down.
pub(super) fn legend_column(area: &Area, top: i32, entries: &[(String, Mark)]) -> Drawn {
    for (i, (name, mark)) in entries.iter().enumerate() {
        let y = top + 24 * i as i32;
        swatch(area, (8, y), *mark)?;
        area.draw(&Text::new(name.clone(), (30, y), text(LABEL, BLACK, HPos::Left, VPos::Center)))?;
    }
    Ok(())
}

/// One legend mark, centred vertically on `y`, starting at `x`.
pub(super) fn swatch(area: &Area, (x, y): (i32, i32), mark: Mark) -> Drawn {
    match mark {
        Mark::Box(color) => {
            area.draw(&Rectangle::new([(x, y - 7), (x + 14, y + 7)], color.filled()))
        }
        Mark::Line(color) => {
            area.draw(&PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2)))
        }
    }
}

/// The mesh style every chart shares: a faint grid on the bold ticks only, labels at `LABEL`.
pub(super) fn mesh_style<X: Ranged, Y: Ranged>(mesh: &mut MeshStyle<'_, '_, X, Y, SVGBackend<'_>>) {
    mesh.label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .light_line_style(TRANSPARENT)
        .bold_line_style(GREY.mix(0.18))
        .axis_style(GREY);
}

/// Draws one chart of `size` pixels into an SVG element. `name` names the chart in errors;
/// `title` is its accessible name.
pub(super) fn svg(
    name: &'static str,
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area) -> Drawn,
) -> Result<String, ReportError> {
    let mut buffer = String::new();
    {
        let root = SVGBackend::with_string(&mut buffer, size).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|()| draw(&root))
            .and_then(|()| root.present())
            .map_err(|err| ReportError::Chart { chart: name, message: err.to_string() })?;
    }
    // An inline SVG needs no namespace declaration; it gets an accessible name instead.
    let label = format!(
        r#"role="img" aria-label="{}""#,
        html_escape::encode_double_quoted_attribute(title)
    );
    Ok(buffer.replacen(r#"xmlns="http://www.w3.org/2000/svg""#, &label, 1))
}

/// The parts of a memory breakdown, bottom of the stack first, with their colours.
const MEMORY_PARTS: [(&str, u32); 10] = [
    ("weights", 0x4e_79a7),
    ("gradients", 0xf2_8e2b),
    ("optimizer states", 0xe1_5759),
    ("activations", 0x76_b7b2),
    ("logits", 0x59_a14f),
    ("buffers", 0xed_c948),
    ("GEMM workspaces", 0xff_9da7),
    ("allocator cache", 0xba_b0ac),
    ("CUDA context", 0x9c_755f),
    ("NCCL buffers", 0xb0_7aa1),
];

fn memory_parts(stage: &StageMemory) -> [f64; 10] {
    stage.breakdown.parts().map(|(_, bytes)| bytes.as_gib())
}

/// Memory per pipeline stage as stacked bars, with the GPU's capacity as a dashed line.
pub(super) fn memory(stages: &[StageMemory], capacity: Bytes) -> Result<String, ReportError> {
    let capacity = capacity.as_gib();
    let tallest = stages.iter().map(|s| s.breakdown.total().as_gib()).fold(0.0, f64::max);
    let top = tallest.max(capacity) * 1.12;
    let count = stages.len();
    let plot = (110 * count as u32).clamp(320, 860);
    let legend = 220;
    let title = "Memory per GPU by pipeline stage";
    svg("memory", title, (plot + 110 + legend, 460), |root| {
        let (left, side) = root.split_horizontally(plot + 110);
        let mut chart = ChartBuilder::on(&left)
            .caption(title, (FONT, CAPTION))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(categories(count), 0.0..top)?;
        let mut mesh = chart.configure_mesh();
        mesh_style(&mut mesh);
        mesh.disable_x_mesh()
            .x_labels(count)
            .x_label_formatter(&|v| category(*v, count).map_or(String::new(), |i| i.to_string()))
            .y_label_formatter(&|gib| format!("{gib:.0}"))
            .x_desc("pipeline stage")
            .y_desc("GiB")
            .draw()?;
        // Bars at most 90 pixels wide.
        let half = (45.0 * count.max(1) as f64 / f64::from(plot)).min(0.32);
        for (part, &(_, hex)) in MEMORY_PARTS.iter().enumerate() {
            let bars = stages.iter().enumerate().map(|(i, stage)| {
                let parts = memory_parts(stage);
                let bottom: f64 = parts[..part].iter().sum();
                let x = i as f64;
                Rectangle::new(
                    [(x - half, bottom), (x + half, bottom + parts[part])],
                    rgb(hex).filled(),
                )
            });
            chart.draw_series(bars)?;
        }
        let totals = stages.iter().enumerate().map(|(i, stage)| {
            let total = stage.breakdown.total().as_gib();
            Text::new(
                format!("{total:.1}"),
                (i as f64, total),
                text(LABEL, GREY, HPos::Center, VPos::Bottom),
            )
        });
        chart.draw_series(totals)?;
        let (first, last) = (-0.5, count.max(1) as f64 - 0.5);
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(first, capacity), (last, capacity)],
            8,
            5,
            ALERT.stroke_width(2),
        )))?;
        // The legend beside the plot, top of the stack first as the bars read.
        let mut entries: Vec<(String, Mark)> =
            vec![(format!("capacity {capacity:.1} GiB"), Mark::Line(ALERT))];
        entries.extend(
            MEMORY_PARTS.iter().rev().map(|&(name, hex)| (name.to_owned(), Mark::Box(rgb(hex)))),
        );
        legend_column(&side, 70, &entries)
    })
}

/// The parts of a step, in the order of `TimeBreakdown::parts`, with their colours.
const TIME_COLORS: [u32; TimeBreakdown::PARTS] = [
    0x4e_79a7, 0xf2_8e2b, 0xed_c948, 0xe1_5759, 0xff_9da7, 0xb0_7aa1, 0x59_a14f, 0x76_b7b2,
    0xba_b0ac, 0xd3_7295, 0x9c_755f,
];

/// One row of a horizontal bar chart: its name on the axis, where its bar starts and ends, its
/// colour and the label written after it.
pub(super) struct BarRow {
    pub(super) name: String,
    pub(super) from: f64,
    pub(super) to: f64,
    pub(super) color: RGBColor,
    pub(super) label: String,
}

/// The x axis of a horizontal bar chart: the room for the rows' names, the axis's end, its unit
/// and how much of a row a bar fills on each side of its middle.
pub(super) struct BarAxis<'a> {
    pub(super) names_width: u32,
    pub(super) end: f64,
    pub(super) unit: &'a str,
    pub(super) half_height: f64,
}

/// A horizontal bar chart, the first row at the top, each bar labelled after its end.
pub(super) fn bar_rows(
    name: &'static str,
    title: &str,
    size: (u32, u32),
    axis: BarAxis,
    rows: &[BarRow],
) -> Result<String, ReportError> {
    let count = rows.len();
    svg(name, title, size, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, CAPTION))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(axis.names_width)
            .build_cartesian_2d(0.0..axis.end, categories(count))?;
        let y = |i: usize| (count - 1 - i) as f64;
        let mut mesh = chart.configure_mesh();
        mesh_style(&mut mesh);
        mesh.disable_y_mesh()
            .y_labels(count.max(1))
            .y_label_formatter(&|v| {
                category(*v, count).map_or(String::new(), |r| rows[count - 1 - r].name.clone())
            })
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc(axis.unit)
            .draw()?;
        let half = axis.half_height;
        chart.draw_series(rows.iter().enumerate().map(|(i, row)| {
            Rectangle::new([(row.from, y(i) - half), (row.to, y(i) + half)], row.color.filled())
        }))?;
        chart.draw_series(rows.iter().enumerate().map(|(i, row)| {
            EmptyElement::at((row.to, y(i)))
                + Text::new(row.label.clone(), (6, 0), text(LABEL, GREY, HPos::Left, VPos::Center))
        }))?;
        Ok(())
    })
}

/// One horizontal bar per part of the step, labelled with its time and share.
pub(super) fn step_time(time: &TimeBreakdown) -> Result<String, ReportError> {
    let parts = time.parts();
    let step = time.step_time().as_millis();
    let longest = parts.iter().map(|(_, t)| t.as_millis()).fold(0.0, f64::max);
    let title = format!("Step time breakdown ({:.3} s; the parts add up to the step)", step / 1e3);
    let rows: Vec<BarRow> = parts
        .iter()
        .enumerate()
        .map(|(i, (name, seconds))| {
            let ms = seconds.as_millis();
            let share = if step > 0.0 { 100.0 * ms / step } else { 0.0 };
            BarRow {
                name: (*name).to_owned(),
                from: 0.0,
                to: ms,
                color: rgb(TIME_COLORS[i]),
                label: format!("{ms:.1} ms ({share:.1} %)"),
            }
        })
        .collect();
    let axis =
        BarAxis { names_width: 150, end: longest.max(1e-9) * 1.3, unit: "ms", half_height: 0.32 };
    bar_rows("step-time", &title, (1000, 430), axis, &rows)
}

/// Rejected candidates, one horizontal bar per reason.
pub(super) fn rejections(rows: &[RejectionRow]) -> Result<String, ReportError> {
    let most = rows.iter().map(|r| r.count).max().unwrap_or(0).max(1) as f64;
    let height = 150 + 46 * rows.len().max(1) as u32;
    let bars: Vec<BarRow> = rows
        .iter()
        .map(|r| BarRow {
            name: r.reason.to_owned(),
            from: 0.0,
            to: r.count as f64,
            color: rgb(0xe1_5759),
            label: r.count.to_string(),
        })
        .collect();
    let axis = BarAxis { names_width: 230, end: most * 1.2, unit: "candidates", half_height: 0.3 };
    bar_rows("rejections", "Rejected candidates by reason", (1000, height), axis, &bars)
}
