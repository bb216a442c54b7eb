//! The loss and validation values of a run as the short texts progress displays show.

use std::collections::BTreeMap;

/// `loss X` for a one-phase run; `<phase> loss X, ...` for each phase of a multi-phase run
/// (whose values are keyed `<phase>/loss`); `loss NaN` when there is neither.
pub fn loss_text(values: &BTreeMap<String, f64>) -> String {
    if let Some(loss) = values.get("loss") {
        return format!("loss {loss:.3}");
    }
    let phases: Vec<String> = values
        .iter()
        .filter_map(|(k, v)| k.strip_suffix("/loss").map(|p| format!("{p} loss {v:.3}")))
        .collect();
    if phases.is_empty() {
        "loss NaN".to_string()
    } else {
        phases.join(", ")
    }
}

/// The validation values besides the losses, as `(short, detail)`: for a character error rate
/// (`cer`) ` CER X%` and `, dev CER X% (mean over batches)`; otherwise nothing and
/// `, <name> <value>` for every other term.
pub fn validation_text(values: &BTreeMap<String, f64>) -> (String, String) {
    match values.get("cer") {
        Some(cer) => (
            format!(" CER {:.1}%", 100.0 * cer),
            format!(", dev CER {:.2}% (mean over batches)", 100.0 * cer),
        ),
        None => (
            String::new(),
            values
                .iter()
                .filter(|(k, _)| k.as_str() != "loss" && !k.ends_with("/loss"))
                .map(|(k, v)| format!(", {k} {v:.4}"))
                .collect(),
        ),
    }
}
