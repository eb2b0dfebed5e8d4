//! The known name a misspelt one most likely means, for errors that name
//! a config key, a property or a type and suggest what was meant.

/// The known name that `name` most likely misspells: within two edits, else
/// sharing a prefix of at least four characters (`evolve` → `evolution`).
pub fn closest<'a>(name: &str, known: impl Iterator<Item = &'a str> + Clone) -> Option<&'a str> {
    let near = known
        .clone()
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k);
    near.or_else(|| {
        known
            .map(|k| (common_prefix(name, k), k))
            .filter(|(n, _)| *n >= 4)
            .max_by_key(|(n, _)| *n)
            .map(|(_, k)| k)
    })
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let swap = if ca == *cb { prev[j] } else { prev[j] + 1 };
            row[j + 1] = swap.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            closest("tempalte", ["template", "table"].into_iter()),
            Some("template")
        );
        assert_eq!(closest("zzz", ["template"].into_iter()), None);
        assert_eq!(
            closest("evolve", ["epoch_unit", "evolution"].into_iter()),
            Some("evolution")
        );
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
