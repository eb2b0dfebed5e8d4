//! The product harness (see `floe_test_support::product`): seeded schedules
//! of ingests that die and are repaired, keyed HTTP changes that commit
//! late, `floe serve` restarted with its clock moved, tables dropped and
//! created again, maintenance after nested evolution, another engine's
//! rollback and concurrent processes, checked against a model by DuckDB and
//! pyiceberg. `FLOE_HARNESS_SCHEDULES` sets how many run (default 100, from
//! `FLOE_HARNESS_FIRST`, 1); `FLOE_HARNESS_SEED` replays one, and
//! `FLOE_HARNESS_TICK_MS` moves the clock forward before each step (as the
//! schedules beside it do in a long run: a seed that differs only there).
//!
//! The only test of its binary: a schedule moves the process's clock.

use floe_test_support::{harness, product};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_product_around_delivery_equals_the_model() {
    product::run_all("product harness", &harness::seeds(1, 100)).await;
}
