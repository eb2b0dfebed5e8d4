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
                    bar.set_message(format!(
                        "{} records, {} committed, {} commits",
                        Counters::get(&counters.records_in),
                        Counters::get(&counters.records_committed),
                        Counters::get(&counters.commits),
                    ));
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
