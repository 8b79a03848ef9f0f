//! Stop strings over streamed text.
//!
//! Text arrives in deltas (one per token) and a stop string may straddle
//! them, so the matcher holds back the longest tail that could still grow
//! into a stop string and releases everything before it.

/// What to do with one delta of text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopUpdate {
    /// Text that can be shown now: it can no longer be part of a stop string.
    pub emit: String,
    /// A stop string was completed: generation should end. `emit` then holds
    /// the text before it; the stop string itself is never emitted.
    pub stopped: bool,
}

#[derive(Clone, Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    matched: Option<usize>,
}

impl StopMatcher {
    /// Empty strings are ignored (they would match before any text).
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
            matched: None,
        }
    }

    /// The stop string that ended generation, if any.
    pub fn matched(&self) -> Option<&str> {
        self.matched.map(|i| self.stops[i].as_str())
    }

    /// Text withheld so far, waiting to see whether it starts a stop string.
    pub fn held(&self) -> &str {
        &self.held
    }

    /// Feeds the next piece of text. After a stop, further input is ignored.
    pub fn push(&mut self, text_delta: &str) -> StopUpdate {
        if self.matched.is_some() {
            return StopUpdate {
                emit: String::new(),
                stopped: true,
            };
        }
        self.held.push_str(text_delta);
        if let Some((index, start)) = self.first_match() {
            self.matched = Some(index);
            let emit = self.held[..start].to_owned();
            self.held.clear();
            return StopUpdate {
                emit,
                stopped: true,
            };
        }
        let keep = self.partial_tail_len();
        let emit: String = self.held.drain(..self.held.len() - keep).collect();
        StopUpdate {
            emit,
            stopped: false,
        }
    }

    /// End of generation: releases whatever was held back (nothing after a
    /// stop).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// The stop string completed earliest in the text (the first one a
    /// token-by-token stream would hit), and where it starts. Among stops
    /// ending at the same place the longest wins, so the result does not
    /// depend on how the text was split into deltas.
    fn first_match(&self) -> Option<(usize, usize)> {
        self.stops
            .iter()
            .enumerate()
            .filter_map(|(i, stop)| {
                self.held
                    .find(stop.as_str())
                    .map(|start| (i, start, start + stop.len()))
            })
            .min_by_key(|&(_, start, end)| (end, start))
            .map(|(i, start, _)| (i, start))
    }

    /// Length of the longest suffix of the held text that is a proper prefix
    /// of some stop string.
    fn partial_tail_len(&self) -> usize {
        self.stops
            .iter()
            .map(|stop| {
                let longest = (stop.len() - 1).min(self.held.len());
                (1..=longest)
                    .rev()
                    .find(|&n| stop.is_char_boundary(n) && self.held.ends_with(&stop[..n]))
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
    }
}
