//! A progress bar over the pipeline's live counters; hidden when stderr is not a TTY.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use floe_core::metrics::Counters;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A running progress display; stops when dropped or finished.
pub struct Progress {
    bar: ProgressBar,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Shows input bytes read out of `total_bytes` (0 when unknown).
    pub fn start(counters: Arc<Counters>, total_bytes: u64) -> Self {
        let bar = if std::io::stderr().is_terminal() {
            ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        let task = {
            let bar = bar.clone();
            tokio::spawn(async move {
                loop {
                    bar.set_position(Counters::get(&counters.bytes_in));
                    bar.set_message(message(&counters));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        Self { bar, task }
    }

    /// Removes the bar.
    pub fn finish(self) {
        self.task.abort();
        self.bar.finish_and_clear();
    }
}

/// Records read, written to Parquet and committed: reading runs ahead of
/// the writers, so without the middle count a bar sits at "all read, 0
/// committed" while the writers work.
fn message(c: &Counters) -> String {
    format!(
        "{} read, {} written, {} committed in {} commits",
        Counters::get(&c.records_in),
        Counters::get(&c.records_written),
        Counters::get(&c.records_committed),
        Counters::get(&c.commits),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_shows_the_writers_progress_between_reading_and_committing() {
        let c = Counters::default();
        Counters::add(&c.records_in, 400_000);
        Counters::add(&c.records_written, 100_000);
        assert_eq!(
            message(&c),
            "400000 read, 100000 written, 0 committed in 0 commits"
        );
    }
}
