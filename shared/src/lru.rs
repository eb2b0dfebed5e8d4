//! The caches of what files hold (the ledger's, the commit path's key
//! locator): files never change once written, so what was read is kept,
//! least recently used first out.

use std::collections::HashMap;
use std::sync::Arc;

/// A least-recently-used map of shared values, bounded by their count and
/// by their total weight (what each is said to hold: rows, keys).
#[derive(Debug)]
pub(crate) struct Lru<T> {
    cap: usize,
    max_weight: usize,
    weight: usize,
    tick: u64,
    map: HashMap<String, (u64, usize, Arc<T>)>,
}

impl<T> Lru<T> {
    /// At most `cap` values.
    pub(crate) fn new(cap: usize) -> Self {
        Self::weighed(cap, usize::MAX)
    }

    /// At most `cap` values weighing at most `max_weight` in all.
    pub(crate) fn weighed(cap: usize, max_weight: usize) -> Self {
        Self {
            cap,
            max_weight,
            weight: 0,
            tick: 0,
            map: HashMap::new(),
        }
    }

    /// The value at `key`, now the most recently used.
    pub(crate) fn get(&mut self, key: &str) -> Option<Arc<T>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(key).map(|(t, _, v)| {
            *t = tick;
            v.clone()
        })
    }

    /// Removes and returns the value at `key`.
    pub(crate) fn take(&mut self, key: &str) -> Option<Arc<T>> {
        let (_, w, v) = self.map.remove(key)?;
        self.weight -= w;
        Some(v)
    }

    /// Keeps `value` as weighing 1.
    pub(crate) fn put(&mut self, key: &str, value: Arc<T>) {
        self.put_weighed(key, value, 1);
    }

    /// Keeps `value` as weighing `weight`, dropping the least recently used
    /// others (never the newest) until both bounds hold.
    pub(crate) fn put_weighed(&mut self, key: &str, value: Arc<T>, weight: usize) {
        self.tick += 1;
        let newest = self.tick;
        if let Some((_, old, _)) = self.map.insert(key.to_string(), (newest, weight, value)) {
            self.weight -= old;
        }
        self.weight += weight;
        while self.map.len() > self.cap || self.weight > self.max_weight {
            let Some(oldest) = self
                .map
                .iter()
                .filter(|(_, (t, _, _))| *t != newest)
                .min_by_key(|(_, (t, _, _))| *t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, w, _)) = self.map.remove(&oldest) {
                self.weight -= w;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weighed_cache_drops_the_oldest_past_its_weight_but_keeps_the_newest() {
        let mut lru = Lru::weighed(10, 100);
        lru.put_weighed("a", Arc::new(1), 40);
        lru.put_weighed("b", Arc::new(2), 40);
        assert!(lru.get("a").is_some());
        // 120 > 100: b, the least recently used, goes.
        lru.put_weighed("c", Arc::new(3), 40);
        assert!(lru.get("b").is_none());
        assert!(lru.get("a").is_some() && lru.get("c").is_some());
        assert_eq!(lru.weight, 80);
        // One heavier than the bound alone is still kept, alone.
        lru.put_weighed("d", Arc::new(4), 500);
        assert_eq!(lru.map.len(), 1);
        assert!(lru.get("d").is_some());
        // Putting a key again replaces its weight.
        lru.put_weighed("d", Arc::new(5), 10);
        assert_eq!(lru.weight, 10);
        let mut counted = Lru::new(2);
        for k in ["x", "y", "z"] {
            counted.put(k, Arc::new(0));
        }
        assert!(counted.get("x").is_none());
        assert_eq!(counted.map.len(), 2);
    }
}
