//! The HTML report of a run with document lengths (issue 16): the length histogram and one
//! step's work per data-parallel replica are drawn, with finite figures, and the step-time
//! section says what the imbalance adds; a run without lengths draws neither.

use crate::support::{report, words};

/// WLB-LLM's 7B-128K configuration with a long-tailed mix as a CSV histogram.
const LONG_TAILED_CSV: &str = "min,max,count\n512,4096,900\n32768,131072,60\n131072,262144,10\n";

/// The text of `<tag ...>...</tag>` elements of `html`, in order, trimmed.
fn texts<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at..];
        // `<p` opens `<p>` and `<p class=...>`, not `<polyline`.
        if !after[open.len()..].starts_with(['>', ' ']) {
            rest = &after[open.len()..];
            continue;
        }
        let Some(start) = after.find('>') else { break };
        let Some(end) = after.find(&close) else { break };
        out.push(after[start + 1..end].trim());
        rest = &after[end + close.len()..];
    }
    out
}

/// The section `id` of `page`, from its opening tag to its end.
fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let at = page.find(&format!("<section id=\"{id}\">")).unwrap_or_else(|| panic!("{id} missing"));
    let end = page[at..].find("</section>").expect("the section ends");
    &page[at..at + end]
}

/// What a reader sees of the data's sections: headings, chart labels, captions, paragraphs.
fn digest(page: &str) -> String {
    let mut out = String::new();
    for id in ["lengths", "replica-loads"] {
        let part = section(page, id);
        out.push_str(&format!("## {}\n", texts(part, "h2").join(" ")));
        for label in texts(part, "text").into_iter().filter(|label| !label.is_empty()) {
            out.push_str(&format!("label: {label}\n"));
        }
        out.push_str(&format!("caption: {}\n\n", texts(part, "figcaption").join(" ")));
    }
    out.push_str(&format!("step time: {}\n", texts(section(page, "step-time"), "p").join(" ")));
    out
}

/// Every number written in `text` (digits with an optional point and fraction).
fn numbers(text: &str) -> Vec<f64> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|word| word.trim_matches('.'))
        .filter(|word| word.chars().any(|c| c.is_ascii_digit()))
        .map(|word| word.parse::<f64>().unwrap_or_else(|_| panic!("{word} is not a number")))
        .collect()
}

#[test]
fn simulate_report_with_lengths_draws_their_histogram_and_each_replicas_work() {
    let dir = tempfile::tempdir().unwrap();
    let lengths = dir.path().join("long_tailed.csv");
    std::fs::write(&lengths, LONG_TAILED_CSV).unwrap();
    let line = "simulate --model llama2-7b --gpus 64 --seq-len 131072 --global-batch 4 --tp 8 \
                --cp 2 --pp 4 --lengths";
    let mut args = words(line);
    args.push(lengths.to_str().unwrap());
    let page = report(&args, &["memory", "step-time", "lengths", "replica-loads", "timeline"]);
    let lengths = section(&page, "lengths");
    assert!(lengths.contains("Document lengths: ") && lengths.contains("long_tailed.csv"));
    assert!(lengths.contains("sequence 131072 tokens") && lengths.contains(">\n128K\n<"));
    let loads = section(&page, "replica-loads");
    assert!(loads.contains("slowest, replica 0: ") && loads.contains("mean of the step: "));
    // The lengths are named by their path: the temporary folder's name changes from run to run.
    let text = digest(&page).replace(dir.path().to_str().unwrap(), "TMP");
    for word in ["NaN", "inf"] {
        assert!(!text.contains(word), "{word} in {text}");
    }
    let figures = numbers(&text);
    assert!(figures.len() > 20 && figures.iter().all(|x| x.is_finite()), "{text}");
    assert!(text.contains("Mean document 9232 tokens") && text.contains("Data imbalance "));
    insta::assert_snapshot!("simulate_report_with_lengths", text);
}

#[test]
fn a_report_without_lengths_draws_no_data_chart() {
    let page = report(
        &words("simulate --model llama3.1-8b --gpus 16 --pp 4 --global-batch 32"),
        &["memory", "step-time", "timeline"],
    );
    assert!(!page.contains("Data imbalance") && !page.contains("Document lengths"));
}
