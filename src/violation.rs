//! Input problems, collected rather than thrown: every check runs and all problems come back
//! together, each naming the field, the value it had and a hint how to fix it.

use std::fmt;

/// One problem with the user's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Dotted path of the offending field as the user wrote it (`plan.tp`, `model.num_layers`).
    pub field: String,
    /// The value the field had, as text.
    pub value: String,
    /// What is wrong, lowercase and without a trailing period.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl Violation {
    /// Builds a violation from its four parts.
    pub fn new(
        field: impl Into<String>,
        value: impl fmt::Display,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            value: value.to_string(),
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}: {}\n  hint: {}", self.field, self.value, self.message, self.hint)
    }
}

/// A non-empty list of problems; the error type of every validation step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violations(Vec<Violation>);

impl Violations {
    /// The problems, in the order the checks found them.
    pub fn list(&self) -> &[Violation] {
        &self.0
    }

    /// Turns a list into `Ok(())` when it is empty, else into the error.
    pub fn check(list: Vec<Violation>) -> Result<(), Violations> {
        if list.is_empty() { Ok(()) } else { Err(Violations(list)) }
    }

    /// A single problem as an error.
    pub fn one(violation: Violation) -> Violations {
        Violations(vec![violation])
    }

    /// Appends the problems of another error.
    pub fn extend(&mut self, other: Violations) {
        self.0.extend(other.0);
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.0.len();
        writeln!(f, "{count} problem{} in the input:", if count == 1 { "" } else { "s" })?;
        for violation in &self.0 {
            writeln!(f, "- {violation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}

/// Collects violations across several independent validation steps.
#[derive(Debug, Default)]
pub struct Collector(Vec<Violation>);

impl Collector {
    /// Records one problem.
    pub fn push(&mut self, violation: Violation) {
        self.0.push(violation);
    }

    /// Records a problem built from its parts.
    pub fn add(
        &mut self,
        field: impl Into<String>,
        value: impl fmt::Display,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.0.push(Violation::new(field, value, message, hint));
    }

    /// Keeps the value of a step that succeeded, records the problems of one that failed.
    pub fn take<T>(&mut self, result: Result<T, Violations>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(errors) => {
                self.0.extend(errors.0);
                None
            }
        }
    }

    /// How many problems have been recorded (a rule compares it before and after a check to know
    /// whether the values it read were accepted).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Ends collection: `Ok(())` when nothing was recorded.
    pub fn finish(self) -> Result<(), Violations> {
        Violations::check(self.0)
    }

    /// Ends collection with what the checks built: the value when nothing was recorded, the
    /// problems when any was. A part missing with no problem recorded would be a defect of the
    /// checks, never of the input: it is reported as one problem naming `what`, not a panic.
    pub fn finish_with<T>(self, built: Option<T>, what: &str) -> Result<T, Violations> {
        self.finish()?;
        built.ok_or_else(|| {
            Violations::one(Violation::new(
                what,
                "(not built)",
                "was not built although no problem was recorded (a defect of meshplan)",
                "report it with the input that caused it",
            ))
        })
    }
}

/// A float as an error shows it: as written for ordinary magnitudes, in exponent form for the
/// huge and tiny ones (1e300 is not spelled out in 301 digits).
pub fn shown_float(value: f64) -> String {
    let magnitude = value.abs();
    if value == 0.0 || !value.is_finite() || (1e-4..1e15).contains(&magnitude) {
        value.to_string()
    } else {
        format!("{value:e}")
    }
}

/// Where a TOML parse error is: " (line N)", or nothing when the parser does not know. Every
/// reader of a TOML input (model, GPU and plan files) names the line the same way.
pub fn toml_error_line(text: &str, err: &toml::de::Error) -> String {
    err.span()
        .map(|span| {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_with_gives_the_value_the_problems_or_names_the_missing_part() {
        assert_eq!(Collector::default().finish_with(Some(3), "part"), Ok(3));
        let mut problems = Collector::default();
        problems.add("plan.tp", 0, "must be 1 or more", "e.g. 8");
        let err = problems.finish_with(None::<u32>, "plan").unwrap_err();
        assert_eq!(err.list().len(), 1);
        assert_eq!(err.list()[0].field, "plan.tp");
        // Nothing recorded but nothing built: an error naming the part, not a panic.
        let err = Collector::default().finish_with(None::<u32>, "plan").unwrap_err();
        assert_eq!(err.list()[0].field, "plan");
        assert!(err.list()[0].message.contains("defect"), "{err}");
    }

    #[test]
    fn floats_are_shown_as_written_unless_huge_or_tiny() {
        assert_eq!(shown_float(1.5), "1.5");
        assert_eq!(shown_float(-1.0), "-1");
        assert_eq!(shown_float(0.0), "0");
        assert_eq!(shown_float(6.984483145486255e304), "6.984483145486255e304");
        assert_eq!(shown_float(1e-300), "1e-300");
        assert_eq!(shown_float(f64::NAN), "NaN");
    }
}
