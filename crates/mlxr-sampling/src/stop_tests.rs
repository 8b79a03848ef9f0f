use crate::{StopMatcher, StopUpdate};

fn matcher(stops: &[&str]) -> StopMatcher {
    StopMatcher::new(stops.iter().map(|s| s.to_string()).collect())
}

/// Feeds the deltas, returning (all emitted text incl. finish, stopped).
fn run(stops: &[&str], deltas: &[&str]) -> (String, bool) {
    let mut m = matcher(stops);
    let mut out = String::new();
    for d in deltas {
        let update = m.push(d);
        out.push_str(&update.emit);
        if update.stopped {
            return (out, true);
        }
    }
    out.push_str(&m.finish());
    (out, false)
}

fn update(emit: &str, stopped: bool) -> StopUpdate {
    StopUpdate {
        emit: emit.into(),
        stopped,
    }
}

#[test]
fn without_stop_strings_everything_passes_through() {
    let mut m = matcher(&[]);
    assert_eq!(m.push("Hello"), update("Hello", false));
    assert_eq!(m.push(" world"), update(" world", false));
    assert_eq!(m.finish(), "");
}

#[test]
fn empty_stop_strings_are_ignored() {
    assert_eq!(run(&["", ""], &["a", "b"]), ("ab".into(), false));
}

#[test]
fn stop_split_across_two_and_three_deltas() {
    let mut m = matcher(&["<|end|>"]);
    assert_eq!(m.push("Hello <|"), update("Hello ", false));
    assert_eq!(m.held(), "<|");
    assert_eq!(m.push("en"), update("", false));
    assert_eq!(m.push("d|> ignored"), update("", true));
    assert_eq!(m.matched(), Some("<|end|>"));

    assert_eq!(run(&["STOP"], &["abcST", "OP"]), ("abc".into(), true));
    assert_eq!(
        run(&["STOP"], &["x", "S", "T", "O", "P", "y"]),
        ("x".into(), true)
    );
}

#[test]
fn held_text_is_released_when_the_match_fails() {
    let mut m = matcher(&["###"]);
    assert_eq!(m.push("a#"), update("a", false));
    assert_eq!(m.push("#b"), update("##b", false));
    assert_eq!(m.push("##"), update("", false));
    assert_eq!(m.finish(), "##");
    assert_eq!(m.finish(), "");
}

#[test]
fn prefix_that_fails_then_recovers() {
    // "aab" over "aaab": after "aaa" only the last "aa" can still start it.
    let mut m = matcher(&["aab"]);
    assert_eq!(m.push("a"), update("", false));
    assert_eq!(m.push("a"), update("", false));
    assert_eq!(m.push("a"), update("a", false));
    assert_eq!(m.push("b"), update("", true));
    assert_eq!(run(&["aab"], &["aaab"]), ("a".into(), true));
    assert_eq!(run(&["aab"], &["a", "aa", "b"]), ("a".into(), true));
}

#[test]
fn overlapping_candidates() {
    // "ab" completes before "abc" could.
    assert_eq!(run(&["abc", "ab"], &["xa", "bc"]), ("x".into(), true));
    assert_eq!(run(&["ab", "abc"], &["xabc"]), ("x".into(), true));
    // Both end together: the longer one (starting earlier) wins.
    let mut m = matcher(&["bc", "abc"]);
    assert_eq!(m.push("zabc"), update("z", true));
    assert_eq!(m.matched(), Some("abc"));
    // A shorter stop completing first wins over a longer one starting earlier.
    assert_eq!(run(&["abcd", "bc"], &["abcd"]), ("a".into(), true));
    // A held prefix of one stop while another completes.
    assert_eq!(run(&["abcd", "cx"], &["ab", "cx"]), ("ab".into(), true));
}

#[test]
fn several_stop_strings() {
    let stops = ["\n\n", "User:", "</s>"];
    assert_eq!(
        run(&stops, &["Hi\n", "User", ": more"]),
        ("Hi\n".into(), true)
    );
    assert_eq!(
        run(&stops, &["Hi", "\n", "\n", "User:"]),
        ("Hi".into(), true)
    );
    assert_eq!(run(&stops, &["a</", "b>"]), ("a</b>".into(), false));
}

#[test]
fn multibyte_text_is_never_split() {
    let mut m = matcher(&["世界"]);
    assert_eq!(m.push("你好世"), update("你好", false));
    assert_eq!(m.held(), "世");
    assert_eq!(m.push("界!"), update("", true));

    let mut m = matcher(&["éa"]);
    assert_eq!(m.push("cafué"), update("cafu", false));
    assert_eq!(m.push("b🦀"), update("éb🦀", false));
    assert_eq!(
        run(&["🦀🦀"], &["x🦀", "y🦀", "🦀z"]),
        ("x🦀y".into(), true)
    );
}

#[test]
fn after_a_stop_input_is_ignored() {
    let mut m = matcher(&["x"]);
    assert_eq!(m.push("axb"), update("a", true));
    assert_eq!(m.push("more"), update("", true));
    assert_eq!(m.finish(), "");
}

/// However the text is cut into deltas, the emitted text is the same.
#[test]
fn result_does_not_depend_on_delta_boundaries() {
    let text = "Hé said: aab! <|eot|> then more <|e";
    let stops = ["<|eot|>", "aab!", "ab!x", "said: b"];
    let whole = run(&stops, &[text]);
    assert_eq!(whole, ("Hé said: ".into(), true));
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut state = 12345u64;
    for _ in 0..200 {
        let mut deltas = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (state >> 60) as usize % 4;
            let end = (i + len).min(chars.len());
            let from = chars[i].0;
            let to = chars.get(end).map_or(text.len(), |c| c.0);
            deltas.push(&text[from..to]);
            i = end;
        }
        assert_eq!(run(&stops, &deltas), whole, "{deltas:?}");
    }
}
