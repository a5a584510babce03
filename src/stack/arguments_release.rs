//! Which Megatron-Core release's command-line arguments a stack's exported plans must be written
//! for (`[export] megatron_core`): a plan exported for an older release uses that release's flag
//! spellings and is refused where the release lacks a flag it needs.

/// The Megatron-Core release whose `arguments.py` a stack's exported flags are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MegatronArguments {
    /// Release `0.minor` (the lowest release of a stack that spans several).
    Release {
        /// The minor version (`6` for core 0.6).
        minor: u32,
    },
    /// The newest arguments meshplan writes (core_v0.15.0's names, core_v0.16.0's for hybrid
    /// context parallelism and activation offload): a stack whose range is open-ended.
    Newest,
    /// Megatron-LM before Megatron-Core (`megatron/arguments.py` of 2020-2022), whose arguments
    /// meshplan does not write.
    BeforeCore,
}

/// The lowest minor release a file may name: the flag table starts at core_v0.4.0.
const FIRST_MINOR: u32 = 4;
/// The highest minor release a file may name (a bound, not a fact about releases).
const LAST_MINOR: u32 = 99;

impl MegatronArguments {
    /// Reads `"0.N"`, `"newest"` or `"before-core"`; `None` for any other text.
    pub fn parse(text: &str) -> Option<MegatronArguments> {
        match text {
            "newest" => return Some(MegatronArguments::Newest),
            "before-core" => return Some(MegatronArguments::BeforeCore),
            _ => {}
        }
        let minor: u32 = text.strip_prefix("0.")?.parse().ok()?;
        (FIRST_MINOR..=LAST_MINOR).contains(&minor).then_some(MegatronArguments::Release { minor })
    }

    /// The minor release checked against, `None` for the newest (and for Megatron-LM before
    /// Megatron-Core, whose exports are refused whole).
    pub fn minor(self) -> Option<u32> {
        match self {
            MegatronArguments::Release { minor } => Some(minor),
            MegatronArguments::Newest | MegatronArguments::BeforeCore => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_read_as_written_and_nothing_else() {
        assert_eq!(MegatronArguments::parse("0.6"), Some(MegatronArguments::Release { minor: 6 }));
        assert_eq!(MegatronArguments::parse("newest"), Some(MegatronArguments::Newest));
        let before = MegatronArguments::parse("before-core");
        assert_eq!(before, Some(MegatronArguments::BeforeCore));
        assert_eq!(before.and_then(MegatronArguments::minor), None);
        for bad in ["0.3", "1.0", "0.6.0", "6", "", "0.x", "0.100"] {
            assert_eq!(MegatronArguments::parse(bad), None, "{bad}");
        }
    }
}
