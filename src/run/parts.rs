//! The model, cluster, training setup and stack that many runs share, validated once: a search
//! builds one run per candidate plan from them without checking the same model and cluster (and
//! parsing the same unit strings) again.

use std::sync::Arc;

use super::{Run, RunSpec, check_stack, validate_plan, validate_training, with_stack_engine};
use crate::hardware::Cluster;
use crate::model::Model;
use crate::plan::{PlanSpec, TrainingSpec};
use crate::stack::Stack;
use crate::violation::{Collector, Violations};

/// A validated model, cluster, training setup and stack, to which each run adds its plan.
#[derive(Debug, Clone)]
pub struct RunParts {
    model: Arc<Model>,
    cluster: Arc<Cluster>,
    training: TrainingSpec,
    stack: Arc<Stack>,
}

impl RunParts {
    /// Validates the model, cluster and training setup of `spec` (its plan is not read), with
    /// every problem reported at once.
    pub fn new(spec: &RunSpec, stack: Arc<Stack>) -> Result<RunParts, Violations> {
        let mut collector = Collector::default();
        let model = collector.take(Model::from_spec(&spec.model));
        let cluster = collector.take(Cluster::from_spec(&spec.cluster));
        validate_training(&mut collector, &spec.training);
        collector.finish()?;
        let (Some(model), Some(cluster)) = (model, cluster) else {
            unreachable!("validation reported no problem, so model and cluster were built");
        };
        Ok(RunParts {
            model: Arc::new(model),
            cluster: Arc::new(cluster),
            training: spec.training.clone(),
            stack,
        })
    }

    /// The run of these parts with `plan` and `micro_batch` sequences per micro-batch: the same
    /// run, or the same problems in the same order, as [`Run::from_spec_with_stack`] gives for the
    /// spec with that plan and micro-batch (the parts' own rules passed when they were built).
    pub fn run(&self, plan: &PlanSpec, micro_batch: i64) -> Result<Run, Violations> {
        let mut collector = Collector::default();
        check_stack(&mut collector, plan, &self.stack);
        let training_spec =
            TrainingSpec { micro_batch: Some(micro_batch), ..self.training.clone() };
        let training = validate_training(&mut collector, &training_spec);
        let plan_spec = with_stack_engine(plan, &self.stack);
        let num_gpus = self.cluster.num_gpus();
        let plan = validate_plan(
            &mut collector,
            &plan_spec,
            &self.model,
            num_gpus,
            Some(&self.cluster),
            &training,
        );
        collector.finish()?;
        let Some(plan) = plan else {
            unreachable!("validation reported no problem, so the plan was built");
        };
        Ok(Run {
            model: Arc::clone(&self.model),
            cluster: Arc::clone(&self.cluster),
            training,
            plan,
            stack: Arc::clone(&self.stack),
        })
    }
}
