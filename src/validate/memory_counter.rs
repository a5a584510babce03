//! Which counter a row's `peak_memory_gib` reads ([`MemoryCounter`]), from the row's own words:
//! its `other_metrics`, `notes` and `tflops_definition`, then the logger of the software it names.
//!
//! - nvidia-smi, "device memory" or "used/total": [`MemoryCounter::DeviceTotal`];
//! - `max_memory_reserved`, `max_reserved` or "reserved": [`MemoryCounter::Reserved`];
//! - `max_memory_allocated`, `max_active` or "allocated": [`MemoryCounter::Allocated`];
//! - a row that names none but ran on torchtitan: [`MemoryCounter::Reserved`], the figure its
//!   training loop logs as `memory` (`max_reserved_gib` of `DeviceMemoryMonitor`, from
//!   `torch.cuda.memory_stats()["reserved_bytes.all.peak"]`, torchtitan/metrics.py);
//! - any other row that names none: [`MemoryCounter::Reserved`], the figure PyTorch training
//!   scripts most often print (Megatron-LM's `report_memory` prints it beside the allocated one),
//!   recorded as an assumption.

use super::row::CalibrationRow;
use crate::cost::breakdown::MemoryCounter;

/// The counter a row's memory figure reads, and whether the row said so (`None`: the reason it
/// was assumed).
pub fn memory_counter(row: &CalibrationRow) -> (MemoryCounter, Option<String>) {
    let text = format!("{} {} {}", row.other_metrics, row.notes, row.tflops_definition)
        .to_ascii_lowercase();
    if text.contains("nvidia-smi") || text.contains("device memory") || text.contains("used/total")
    {
        return (MemoryCounter::DeviceTotal, None);
    }
    if text.contains("reserved") {
        return (MemoryCounter::Reserved, None);
    }
    if text.contains("allocated") || text.contains("max_active") {
        return (MemoryCounter::Allocated, None);
    }
    let why = if row.software_or_release.to_ascii_lowercase().contains("torchtitan") {
        "torchtitan logs the allocator's peak reserved memory (metrics.py, max_reserved_gib)"
    } else {
        "the row does not say; most PyTorch training logs print the peak reserved memory"
    };
    (MemoryCounter::Reserved, Some(why.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(other_metrics: &str, software: &str) -> CalibrationRow {
        CalibrationRow {
            other_metrics: other_metrics.into(),
            software_or_release: software.into(),
            ..CalibrationRow::default()
        }
    }

    #[test]
    fn the_rows_words_name_the_counter() {
        let smi = "memory as printed: 76/80 (GiB used/total, typically nvidia-smi-style device \
                   memory, not allocator peak)";
        assert_eq!(memory_counter(&row(smi, "")), (MemoryCounter::DeviceTotal, None));
        let allocated = row("torch.cuda.max_memory_allocated", "");
        assert_eq!(memory_counter(&allocated).0, MemoryCounter::Allocated);
        assert_eq!(memory_counter(&row("max_reserved 70 GiB", "")).0, MemoryCounter::Reserved);
    }

    #[test]
    fn an_unstated_counter_is_reserved_with_the_reason_recorded() {
        let (counter, why) = memory_counter(&row("", "torchtitan @ 2024-12"));
        assert_eq!(counter, MemoryCounter::Reserved);
        assert!(why.unwrap().contains("torchtitan"));
        let (counter, why) = memory_counter(&row("", "Megatron-LM"));
        assert_eq!(counter, MemoryCounter::Reserved);
        assert!(why.unwrap().contains("does not say"));
    }
}
