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
