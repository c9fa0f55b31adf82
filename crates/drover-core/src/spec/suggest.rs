//! "Did you mean …?" for names the user mistyped (models, providers).
//!
//! Owns the ranking of close names. What must stay true: at most five suggestions, no
//! duplicates, a stable order for equal ranks (the candidates' own order), and bounded
//! work on hostile input: edit distance is only computed for names of similar, modest
//! length.

/// How many names a suggestion lists at most.
pub const MAX_SUGGESTIONS: usize = 5;

/// Beyond this many characters a name is not a typo; only substring matches are offered.
const MAX_FUZZY_CHARS: usize = 128;

/// Up to five candidates close to `wanted`, best first: names that start with it, then
/// names that contain it (or that it contains), then names within a Levenshtein distance
/// of `max(2, len / 3)`, nearest first. Comparison ignores case; ties keep the
/// candidates' order.
pub fn suggest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let wanted = wanted.trim().to_lowercase();
    if wanted.is_empty() {
        return Vec::new();
    }
    let wanted_chars: Vec<char> = wanted.chars().collect();
    let threshold = (wanted_chars.len() / 3).max(2);

    // (rank, distance, name); the sort below is stable, so equal keys keep input order.
    let mut ranked: Vec<(u8, usize, &str)> = Vec::new();
    for name in candidates {
        if name.is_empty() || ranked.iter().any(|&(_, _, seen)| seen == name) {
            continue;
        }
        let lower = name.to_lowercase();
        let rank = if lower.starts_with(&wanted) {
            Some((0, 0))
        } else if lower.contains(&wanted) || wanted.contains(&lower) {
            Some((1, 0))
        } else {
            within_distance(&wanted_chars, &lower, threshold).map(|d| (2, d))
        };
        if let Some((rank, distance)) = rank {
            ranked.push((rank, distance, name));
        }
    }
    ranked.sort_by_key(|&(rank, distance, _)| (rank, distance));
    ranked
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, _, name)| name.to_string())
        .collect()
}

/// The Levenshtein distance between `a` and `b` (in chars) when it is at most `limit`.
fn within_distance(a: &[char], b: &str, limit: usize) -> Option<usize> {
    let b_len = b.chars().count();
    if a.len() > MAX_FUZZY_CHARS || b_len > MAX_FUZZY_CHARS || a.len().abs_diff(b_len) > limit {
        return None;
    }
    let a: String = a.iter().collect();
    let distance = strsim::levenshtein(&a, b);
    (distance <= limit).then_some(distance)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODELS: &[&str] = &[
        "claude-opus-4-1",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "gpt-5",
        "gpt-5-codex",
        "gpt-5-mini",
        "o3",
        "o4-mini",
    ];

    #[test]
    fn suggestions_rank_prefix_then_substring_then_distance() {
        let cases: &[(&str, &[&str])] = &[
            // prefix matches, in catalog order
            ("gpt-5", &["gpt-5", "gpt-5-codex", "gpt-5-mini"]),
            // case-insensitive prefix
            ("CLAUDE-S", &["claude-sonnet-4-5"]),
            // substring, either way round
            ("sonnet", &["claude-sonnet-4-5"]),
            ("claude-sonnet-4-5-latest", &["claude-sonnet-4-5"]),
            // typos within max(2, len/3) (here 5), nearest first
            (
                "claude-sonet-4-5",
                &["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"],
            ),
            ("gtp-5", &["gpt-5"]),
            // nothing close
            ("llama-70b", &[]),
            ("", &[]),
            ("   ", &[]),
        ];
        for &(wanted, want) in cases {
            assert_eq!(
                suggest(wanted, MODELS.iter().copied()),
                want,
                "suggest({wanted:?})"
            );
        }
    }

    #[test]
    fn at_most_five_without_duplicates_in_stable_order() {
        let names = ["m1", "m2", "m1", "m3", "m4", "m5", "m6"];
        assert_eq!(suggest("m", names), vec!["m1", "m2", "m3", "m4", "m5"]);
    }

    #[test]
    fn nearer_typos_come_first() {
        let names = ["abcxy", "abcdx"];
        // "abcde": abcdx is 1 edit away, abcxy 2.
        assert_eq!(suggest("abcde", names), vec!["abcdx", "abcxy"]);
    }

    #[test]
    fn huge_names_cost_little_and_only_match_by_substring() {
        let huge = "x".repeat(1_000_000);
        assert!(suggest(&huge, MODELS.iter().copied()).is_empty());
        let huge_with_model = format!("{huge}gpt-5-mini");
        assert_eq!(
            suggest(&huge_with_model, MODELS.iter().copied()),
            vec!["gpt-5", "gpt-5-mini"]
        );
    }

    #[test]
    fn distance_is_levenshtein_over_chars() {
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(within_distance(&chars("kitten"), "sitting", 3), Some(3));
        assert_eq!(within_distance(&chars("kitten"), "sitting", 2), None);
        assert_eq!(within_distance(&chars("héllo"), "hello", 2), Some(1));
        assert_eq!(within_distance(&chars(""), "ab", 2), Some(2));
    }
}
