//! A cache of what a run's data gives for one shape of batch (a dealing of re-packed windows, a
//! placement of documents on hybrid context-parallel groups, a re-packing window's imbalance),
//! made the first time a run of that shape asks and shared by every run that prices the same data
//! and model (every candidate of a search, or those that share their pricing).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Values by shape. A clone starts empty and any two compare equal, since what it holds follows
/// from the data alone.
#[derive(Debug)]
pub struct ShapeCache<K, V> {
    made: Mutex<BTreeMap<K, Arc<OnceLock<V>>>>,
}

impl<K: Ord + Copy, V> ShapeCache<K, V> {
    /// The value of `shape`, made by `make` the first time it is asked for.
    pub fn get_or_make(&self, shape: K, make: impl FnOnce() -> V) -> Arc<OnceLock<V>> {
        let slot = {
            let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(made.entry(shape).or_default())
        };
        // Made outside the lock: runs of other shapes do not wait for this one.
        slot.get_or_init(make);
        slot
    }
}

impl<K, V> Default for ShapeCache<K, V> {
    fn default() -> ShapeCache<K, V> {
        ShapeCache { made: Mutex::new(BTreeMap::new()) }
    }
}

impl<K, V> Clone for ShapeCache<K, V> {
    fn clone(&self) -> ShapeCache<K, V> {
        ShapeCache::default()
    }
}

impl<K, V> PartialEq for ShapeCache<K, V> {
    fn eq(&self, _: &ShapeCache<K, V>) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_makes_each_shape_once() {
        let cache: ShapeCache<u64, u64> = ShapeCache::default();
        let first = cache.get_or_make(8, || 1);
        let second = cache.get_or_make(8, || 2);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(second.get(), Some(&1));
        assert_eq!(cache.get_or_make(9, || 3).get(), Some(&3));
    }
}
