//! The Pareto front of throughput against memory: the points that no other point beats on both.

/// The indices of the points on the Pareto front of `points`, given as `(memory, throughput)`:
/// less memory and more throughput are better. A point is on the front unless another point has
/// at most its memory and at least its throughput, and is strictly better in one of the two
/// (equal points are all on the front). The indices come in order of increasing memory, ties in
/// index order; NaN coordinates are ordered by `f64::total_cmp`.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    // Least memory first; at equal memory, most throughput first.
    order.sort_by(|&a, &b| {
        points[a]
            .0
            .total_cmp(&points[b].0)
            .then(points[b].1.total_cmp(&points[a].1))
            .then(a.cmp(&b))
    });
    let mut front = Vec::new();
    // The most throughput among points with strictly less memory than the current group.
    let mut best_before: Option<f64> = None;
    let mut start = 0;
    while start < order.len() {
        let memory = points[order[start]].0;
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&i| points[i].0.total_cmp(&memory).is_eq())
                .count();
        // The group's best throughput comes first; points below it are beaten at equal memory.
        let top = points[order[start]].1;
        let beaten_by_less_memory = best_before.is_some_and(|b| b.total_cmp(&top).is_ge());
        if !beaten_by_less_memory {
            front.extend(
                order[start..end]
                    .iter()
                    .copied()
                    .take_while(|&i| points[i].1.total_cmp(&top).is_eq()),
            );
            best_before = Some(top);
        }
        start = end;
    }
    front
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dominates(a: (f64, f64), b: (f64, f64)) -> bool {
        a.0 <= b.0 && a.1 >= b.1 && (a.0 < b.0 || a.1 > b.1)
    }

    #[test]
    fn a_small_case_by_hand() {
        let points = [(10.0, 100.0), (20.0, 150.0), (15.0, 90.0), (30.0, 150.0), (5.0, 50.0)];
        assert_eq!(pareto_front(&points), [4, 0, 1]);
    }

    #[test]
    fn equal_points_are_all_on_the_front_and_empty_input_has_none() {
        assert_eq!(pareto_front(&[(1.0, 2.0), (1.0, 2.0), (1.0, 1.0)]), [0, 1]);
        assert!(pareto_front(&[]).is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            rng_seed: proptest::test_runner::RngSeed::Fixed(6),
            ..ProptestConfig::default()
        })]

        #[test]
        fn no_point_on_the_front_is_dominated_and_every_other_point_is(
            // A coarse grid makes ties in memory, throughput or both common.
            raw in proptest::collection::vec((0u8..12, 0u8..12), 0..40)
        ) {
            let points: Vec<(f64, f64)> =
                raw.iter().map(|&(m, t)| (f64::from(m), f64::from(t) * 10.0)).collect();
            let front = pareto_front(&points);
            for (i, &p) in points.iter().enumerate() {
                let dominated = points.iter().any(|&q| dominates(q, p));
                prop_assert_eq!(front.contains(&i), !dominated, "point {} {:?}", i, p);
            }
            prop_assert!(front.windows(2).all(|w| points[w[0]].0 <= points[w[1]].0));
        }
    }
}
