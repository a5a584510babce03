//! The model, cluster, training setup and stack that many runs share, validated once: a search
//! builds one run per candidate plan from them without checking the same model and cluster (and
//! parsing the same unit strings) again.

use std::sync::Arc;

use super::data::{RunData, check_plan_against_data, validate_data};
use super::{
    Accepted, Run, RunSpec, Target, check_stack, validate_plan, validate_training,
    with_stack_defaults,
};
use crate::hardware::Cluster;
use crate::model::Model;
use crate::plan::{PlanSpec, Training, TrainingSpec};
use crate::stack::Stack;
use crate::violation::{Collector, Violations};

/// A validated model, cluster, training setup and stack, to which each run adds its plan.
#[derive(Debug, Clone)]
pub struct RunParts {
    model: Arc<Model>,
    cluster: Arc<Cluster>,
    training_spec: TrainingSpec,
    /// The training setup validated, with the spec's micro-batch.
    training: Training,
    stack: Arc<Stack>,
    data: Option<Arc<RunData>>,
}

impl RunParts {
    /// Validates the model, cluster and training setup of `spec` (its plan is not read), with
    /// every problem reported at once.
    pub fn new(spec: &RunSpec, stack: Arc<Stack>) -> Result<RunParts, Violations> {
        let mut collector = Collector::default();
        let model = collector.take(Model::from_spec(&spec.model));
        let cluster = collector.take(Cluster::from_spec(&spec.cluster));
        let before = collector.len();
        let training = validate_training(&mut collector, &spec.training);
        let batch =
            (collector.len() == before).then_some((training.seq_len, training.global_batch));
        let data = validate_data(&mut collector, spec.data.as_ref(), model.as_ref(), batch);
        let (model, cluster) = collector.finish_with(model.zip(cluster), "model and cluster")?;
        Ok(RunParts {
            model: Arc::new(model),
            cluster: Arc::new(cluster),
            training_spec: spec.training.clone(),
            training,
            stack,
            data,
        })
    }

    /// The share of a step's `global_batch x seq_len` tokens it trains
    /// ([`RunData::trained_fraction`]; all of them without data), in fixed micro-batches or
    /// (`variable`) in variable ones.
    pub fn trained_fraction(&self, variable: bool) -> f64 {
        self.data
            .as_ref()
            .map_or(1.0, |data| data.trained_fraction(&self.model, variable.then_some(1)))
    }

    /// The run of these parts with `plan` and `micro_batch` sequences per micro-batch: the same
    /// run, or the same problems in the same order, as [`Run::from_spec_with_stack`] gives for the
    /// spec with that plan and micro-batch (the parts' own rules passed when they were built).
    pub fn run(&self, plan: &PlanSpec, micro_batch: i64) -> Result<Run, Violations> {
        let mut collector = Collector::default();
        check_stack(&mut collector, plan, &self.stack);
        // The micro-batch is the one training field not checked with the parts: one in range is
        // taken as it is (what validation would give), any other is validated to be reported.
        let before = collector.len();
        let training = match u64::try_from(micro_batch) {
            Ok(size) if (1..=crate::limits::GLOBAL_BATCH).contains(&size) => {
                Training { micro_batch: size, ..self.training }
            }
            _ => {
                let spec =
                    TrainingSpec { micro_batch: Some(micro_batch), ..self.training_spec.clone() };
                validate_training(&mut collector, &spec)
            }
        };
        // The cluster passed its checks when the parts were built.
        let accepted = Accepted { gpus: true, training: collector.len() == before };
        let plan_spec = with_stack_defaults(plan, &self.stack, self.model.hybrid().is_some());
        let num_gpus = self.cluster.num_gpus();
        let plan = validate_plan(
            &mut collector,
            &plan_spec,
            &self.model,
            Target {
                gpus: num_gpus,
                cluster: Some(&self.cluster),
                experts: super::expert_rules::ExpertRules::of(&self.stack),
            },
            &training,
            accepted,
        );
        if let Some(plan) = &plan {
            // Parts are built only when every part passed: their data is there iff given.
            let batching = self.data.as_ref().map(|data| data.data.batching());
            check_plan_against_data(&mut collector, plan, batching);
        }
        let plan = collector.finish_with(plan, "plan")?;
        Ok(Run {
            model: Arc::clone(&self.model),
            cluster: Arc::clone(&self.cluster),
            training,
            plan,
            stack: Arc::clone(&self.stack),
            data: self.data.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Engine, PipelineSchedule, RecomputeKind};
    use crate::presets;

    #[test]
    fn a_run_from_parts_is_the_run_or_the_problems_from_spec_gives() {
        let base = crate::run::test_spec("llama3.1-8b", 16, 4096, 32, 1, PlanSpec::default());
        let stack = Arc::new(presets::stack(presets::default_stack_id(Engine::DEFAULT)).unwrap());
        let parts = RunParts::new(&base, Arc::clone(&stack)).unwrap();
        let plans = [
            PlanSpec::default(),
            PlanSpec { tp: Some(8), pp: Some(2), ..PlanSpec::default() },
            PlanSpec { tp: Some(4), pp: Some(4), vp: Some(2), ..PlanSpec::default() },
            PlanSpec { recompute: Some(RecomputeKind::Full), zero: Some(2), ..PlanSpec::default() },
            // Problems: sizes that do not divide, a schedule without its precondition, a stack
            // and an engine that do not match the run's stack.
            PlanSpec { tp: Some(3), ..PlanSpec::default() },
            PlanSpec {
                pp: Some(4),
                schedule: Some(PipelineSchedule::Dualpipe),
                ..PlanSpec::default()
            },
            PlanSpec { stack: Some("deepspeed".into()), ..PlanSpec::default() },
            PlanSpec { engine: Some(Engine::Torchtitan), tp: Some(0), ..PlanSpec::default() },
        ];
        for plan in plans {
            let too_large = crate::limits::GLOBAL_BATCH as i64 + 1;
            for micro_batch in [1, 2, 3, 0, -1, too_large] {
                let mut spec = base.clone();
                spec.plan = plan.clone();
                spec.training.micro_batch = Some(micro_batch);
                let expected = Run::from_spec_with_stack(&spec, Arc::clone(&stack));
                assert_eq!(parts.run(&plan, micro_batch), expected, "{plan:?} mbs {micro_batch}");
            }
        }
    }

    #[test]
    fn parts_report_every_problem_of_model_cluster_and_training() {
        let mut spec = crate::run::test_spec("llama3.1-8b", 0, 0, 32, 1, PlanSpec::default());
        spec.model.num_layers = 0;
        let stack = Arc::new(presets::stack(presets::default_stack_id(Engine::DEFAULT)).unwrap());
        let problems = RunParts::new(&spec, stack).unwrap_err();
        let fields: Vec<&str> = problems.list().iter().map(|v| v.field.as_str()).collect();
        assert!(fields.contains(&"model.num_layers"), "{fields:?}");
        assert!(fields.contains(&"cluster.num_gpus"), "{fields:?}");
        assert!(fields.contains(&"training.seq_len"), "{fields:?}");
    }
}
