//! Built-in presets: model architectures and GPUs shipped as TOML data in `presets/` and embedded
//! into the binary, so a preset is parsed by exactly the same code as a user's file.

use crate::hardware::GpuSpec;
use crate::model::ModelSpec;

/// One embedded preset file.
#[derive(Debug, Clone, Copy)]
pub struct PresetFile {
    /// The name used on the command line.
    pub name: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

macro_rules! presets {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(PresetFile { name: $name, text: include_str!(concat!("../presets/", $dir, "/", $name, ".toml")) }),*]
    };
}

/// Every built-in model preset.
pub const MODELS: &[PresetFile] = presets!("models":
    "llama3.1-70b",
);

/// Every built-in GPU preset.
pub const GPUS: &[PresetFile] = presets!("gpus":
    "h100-sxm",
);

/// Why a preset could not be produced.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PresetError {
    /// No preset has that name.
    #[error("unknown {kind} preset `{name}`; known: {known}")]
    Unknown {
        /// `model` or `gpu`.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
    },
    /// The embedded file does not parse (a bug in the shipped data, caught by the tests).
    #[error("built-in {kind} preset `{name}` is malformed: {message}")]
    Malformed {
        /// `model` or `gpu`.
        kind: &'static str,
        /// The preset's name.
        name: String,
        /// The parser's message.
        message: String,
    },
}

fn find<'a>(list: &'a [PresetFile], kind: &'static str, name: &str) -> Result<&'a PresetFile, PresetError> {
    let wanted = name.trim().to_ascii_lowercase();
    list.iter().find(|p| p.name == wanted).ok_or_else(|| PresetError::Unknown {
        kind,
        name: name.to_owned(),
        known: list.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
    })
}

/// The model preset of that name.
pub fn model(name: &str) -> Result<ModelSpec, PresetError> {
    let file = find(MODELS, "model", name)?;
    toml::from_str(file.text).map_err(|err| PresetError::Malformed {
        kind: "model",
        name: file.name.to_owned(),
        message: err.to_string(),
    })
}

/// The GPU preset of that name.
pub fn gpu(name: &str) -> Result<GpuSpec, PresetError> {
    let file = find(GPUS, "gpu", name)?;
    toml::from_str(file.text).map_err(|err| PresetError::Malformed {
        kind: "gpu",
        name: file.name.to_owned(),
        message: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::{Cluster, ClusterSpec};
    use crate::model::Model;

    #[test]
    fn every_model_preset_parses_validates_and_is_named_after_its_file() {
        for file in MODELS {
            let spec = model(file.name).unwrap();
            assert_eq!(spec.name, file.name);
            assert!(spec.source.is_some(), "{} has no source", file.name);
            Model::from_spec(&spec).unwrap();
        }
    }

    #[test]
    fn every_gpu_preset_parses_validates_and_is_named_after_its_file() {
        for file in GPUS {
            let spec = gpu(file.name).unwrap();
            assert_eq!(spec.name, file.name);
            assert!(spec.source.is_some(), "{} has no source", file.name);
            Cluster::from_spec(&ClusterSpec { gpu: spec, num_gpus: 8 }).unwrap();
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = model("llama9").unwrap_err().to_string();
        assert!(err.contains("unknown model preset `llama9`") && err.contains("llama3.1-70b"), "{err}");
    }
}
