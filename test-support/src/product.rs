//! The product harness: seeded schedules of what users do around delivery,
//! each step through the parts `floe ingest`, `floe serve`, `floe ledger
//! repair`, `floe maintain` and `floe table drop/create` run, on one local
//! warehouse, against a model of every table.
//!
//! Where [`crate::harness`] models deliveries on a flat schema, a schedule
//! here draws the product around them: records with nested structs, lists
//! of structs and maps of structs whose shapes evolve (nested adds,
//! widening, dotted names, dotted names that collide with a nested field,
//! keyed changes missing their key); processes that die at every fault
//! point, followed by a ledger repair or not and a rerun; a repair of an
//! intact ledger; keyed HTTP requests whose commit fails and is retried
//! after newer ones; `floe serve` killed and started again with its clock
//! moved back or forward; the table dropped (purged or not) and created
//! again, and old inputs and idempotency keys sent to it (within their
//! window and after it); maintenance (compaction, expiry) after evolution;
//! another engine's rollback, and the undone input sent again; two
//! processes ingesting standard input at once into two tables of the
//! warehouse. Each step ends before the next starts, so the model knows
//! what every table holds; the tables are read back at the end by DuckDB
//! and pyiceberg (`shared/tests/read_rows.py`), which share no code with
//! floe, row by row and field by field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use floe_core::catalog::{CatalogError, CatalogRef, Committed, TableCommit, Wrapping};
use floe_core::clock;
use floe_core::config::{CatalogType, Config};
use floe_core::deploy::{Deployment, Role};
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::http::buffer::{Buffer, BufferError};
use floe_core::http::drain::LocalDrain;
use floe_core::http::local::LocalCommits;
use floe_core::http::{HttpIngest, IamCaller};
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::maintain::{self, MaintainOptions};
use floe_core::source::SourceKind;
use floe_core::tabledef;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Rng, report};

/// Steps of one schedule, at least.
const MIN_STEPS: usize = 6;
/// The commit window of the harness's `floe serve`.
const SERVE_WINDOW: Duration = Duration::from_millis(30);
/// The commit window of a `floe serve` started again after a kill.
const RESTART_WINDOW: Duration = Duration::from_millis(400);
/// The buffer window of the harness's `floe serve`.
const BUFFER_WINDOW: Duration = Duration::from_millis(60);
/// Schedules run at once.
const AT_ONCE: usize = 3;
/// Environment variable: milliseconds the clock moves forward before each
/// step (never undone), as the schedules running beside one move it.
const TICK_ENV: &str = "FLOE_HARNESS_TICK_MS";

/// What a table holds, by id: the normalized row.
type Rows = BTreeMap<i64, Value>;

/// A table as the model knows it.
#[derive(Debug, Clone, Default)]
struct Model {
    rows: Rows,
    /// Inputs whose every record is in the table.
    inputs: BTreeSet<usize>,
    /// The state at the end of earlier steps, by the snapshot current then:
    /// what another engine's rollback to it leaves (and the step, for the trace).
    history: Vec<(i64, Rows, BTreeSet<usize>, usize)>,
}

/// One file or stdin input of a schedule: its lines and what each becomes.
#[derive(Debug, Clone)]
struct Batch {
    lines: Vec<String>,
    /// Per line: the id it changes and its row (`None`: a keyed delete), or
    /// nothing when it must be dead-lettered.
    effects: Vec<Option<(i64, Option<Value>)>>,
}

impl Batch {
    /// Whether a POST of it written directly answered as it should: 200 or
    /// 202, and 400 naming each bad record (the others written) when it has
    /// some.
    fn written_as_answered(&self, status: u16, answer: &Value) -> bool {
        let (least, most) = self.dead_letters();
        match answer["rejected"].as_array().map_or(0, Vec::len) {
            0 => least == 0 && (status == 200 || status == 202),
            named => status == 400 && (least..=most).contains(&named),
        }
    }

    /// How many of its lines a run dead-letters: each bad one, except that
    /// a keyed table folds the changes of one key within a source batch, so
    /// a bad change followed by another of its key may be folded away
    /// before it is read (its effect is the same: the later change wins).
    fn dead_letters(&self) -> (usize, usize) {
        let most = self.effects.iter().filter(|e| e.is_none()).count();
        let superseded = self
            .lines
            .iter()
            .enumerate()
            .filter(|(n, line)| {
                let id = serde_json::from_str::<Value>(line)
                    .ok()
                    .and_then(|v| v["id"].as_i64());
                self.effects[*n].is_none()
                    && id.is_some()
                    && self.effects[n + 1..]
                        .iter()
                        .flatten()
                        .any(|(k, _)| Some(*k) == id)
            })
            .count();
        (most - superseded, most)
    }
}

/// The shapes a schedule's records have reached: each flag, once drawn,
/// stays drawable (a stream's producers upgrade over time).
#[derive(Debug, Default)]
struct Shapes {
    struct_add: bool,
    list_add: bool,
    map_add: bool,
    top_add: bool,
    wide: bool,
    dotted: bool,
}

/// Generates records.
struct Gen {
    rng: Rng,
    keyed: bool,
    next_id: i64,
    shapes: Shapes,
    counter: u64,
}

impl Gen {
    /// A batch of `n` records, with the schedule's shapes and new ones.
    fn batch(&mut self, n: usize) -> Batch {
        // A new shape now and then: the next records may carry it.
        match self.rng.below(8) {
            0 => self.shapes.struct_add = true,
            1 => self.shapes.list_add = true,
            2 => self.shapes.map_add = true,
            3 => self.shapes.top_add = true,
            4 => self.shapes.wide = true,
            5 => self.shapes.dotted = true,
            _ => {}
        }
        let mut out = Batch {
            lines: Vec::new(),
            effects: Vec::new(),
        };
        for _ in 0..n {
            let (line, effect) = self.record();
            out.lines.push(line.to_string());
            out.effects.push(effect);
        }
        out
    }

    fn record(&mut self) -> (Value, Option<(i64, Option<Value>)>) {
        self.counter += 1;
        let id = if self.keyed {
            self.rng.below(6) as i64
        } else {
            self.next_id += 1;
            self.next_id
        };
        let c = self.counter;
        // A dotted name that collides with the nested `s.a`: refused.
        if self.rng.chance(4) {
            return (json!({"id": id, "v": format!("c{c}"), "s.a": 1}), None);
        }
        if self.keyed {
            if self.rng.chance(3) {
                return (json!({"v": format!("nokey{c}")}), None);
            }
            if self.rng.chance(15) {
                return (json!({"_op": "d", "id": id}), Some((id, None)));
            }
        }
        self.row(id)
    }

    /// A valid change of `id` (an append record, or a keyed upsert) in the
    /// schedule's shapes.
    fn row(&mut self, id: i64) -> (Value, Option<(i64, Option<Value>)>) {
        self.counter += 1;
        let c = self.counter;
        let a: i64 = if self.shapes.wide && self.rng.chance(40) {
            3_000_000_000 + c as i64
        } else {
            c as i64 % 1000
        };
        let mut s = json!({"a": a});
        if self.shapes.struct_add && self.rng.chance(60) {
            s["b"] = json!(format!("b{c}"));
        }
        let mut elem = json!({"x": format!("x{c}")});
        if self.shapes.list_add && self.rng.chance(60) {
            elem["z"] = json!(c);
        }
        let mut mv = json!({"y": c});
        if self.shapes.map_add && self.rng.chance(60) {
            mv["w"] = json!(format!("w{c}"));
        }
        let mut row = json!({"id": id, "v": format!("r{c}"), "s": s, "l": [elem], "m": {"k": mv}});
        if self.shapes.top_add && self.rng.chance(60) {
            row["n1"] = json!(c);
        }
        if self.shapes.dotted && self.rng.chance(40) {
            row["q.r"] = json!(format!("q{c}"));
        }
        let line = match self.keyed {
            true => {
                let mut l = row.clone();
                l["_op"] = json!("u");
                l
            }
            false => row.clone(),
        };
        (line, Some((id, Some(normalize(&row)))))
    }
}

/// `v` without null fields and empty lists, at every depth: how a row reads
/// whether a reader writes a missing nested field as null or leaves it out.
pub fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null() && x.as_array().is_none_or(|a| !a.is_empty()))
                .map(|(k, x)| (k.clone(), normalize(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        _ => v.clone(),
    }
}

/// A catalog as one process sees it: once a commit fails (an injected fault,
/// a lost answer) the process is dead and commits nothing more; while
/// `broken` is set, every commit fails (storage unreadable for a while).
#[derive(Debug)]
struct Mortal {
    inner: CatalogRef,
    dead: AtomicBool,
    mortal: bool,
    broken: Arc<AtomicBool>,
}

#[async_trait]
impl Wrapping for Mortal {
    fn inner(&self) -> &CatalogRef {
        &self.inner
    }

    async fn around_commit(&self, commit: TableCommit) -> Committed {
        if self.dead.load(Ordering::SeqCst) || self.broken.load(Ordering::SeqCst) {
            return Committed::of(Err(CatalogError::failed(
                "the process is gone or its storage unreadable",
            )));
        }
        let result = self.inner.commit(commit).await;
        if self.mortal
            && !matches!(
                &result,
                Committed::Landed(_) | Committed::NotApplied(CatalogError::Conflict { .. })
            )
        {
            self.dead.store(true, Ordering::SeqCst);
        }
        result
    }
}

/// One process on the warehouse: its deployment, whose catalog dies with
/// the first failed commit when `faults` are armed, and fails while
/// `broken` is set.
async fn process(dir: &Path, faults: Faults, broken: Option<Arc<AtomicBool>>) -> Deployment {
    let mut config = Config::default();
    config.warehouse.path = Some(dir.to_path_buf());
    config.catalog.kind = CatalogType::Sqlite;
    let armed = faults.is_armed();
    let mut deployment = Deployment::from_config(config, faults, Role::Ingest)
        .await
        .unwrap();
    if armed || broken.is_some() {
        deployment.catalog = Arc::new(Mortal {
            inner: deployment.catalog.clone(),
            dead: AtomicBool::new(false),
            mortal: armed,
            broken: broken.unwrap_or_default(),
        });
    }
    deployment
}

/// `floe serve` in this process: the API, its committer and, with
/// `http.buffer_window_ms`, the drain of its buffer.
struct Serve {
    api: HttpIngest,
    commits: LocalCommits,
    drain: Option<LocalDrain>,
}

impl Serve {
    /// Starts serving; with `buffer`, POSTs without a key are buffered and
    /// drained by a writer that fails at those faults.
    async fn start(
        dir: &Path,
        broken: Arc<AtomicBool>,
        window: Duration,
        buffer: Option<Faults>,
    ) -> Self {
        let mut deployment = process(dir, Faults::none(), Some(broken.clone())).await;
        let commits = LocalCommits::start(&deployment, window).await.unwrap();
        deployment.queue = commits.queue();
        let mut api = HttpIngest::new(&deployment)
            .unwrap()
            .with_watch(commits.watch());
        let mut drain = None;
        if let Some(faults) = buffer {
            let mut writes = process(dir, faults, Some(broken)).await;
            writes.queue = commits.queue();
            let started = LocalDrain::start(&writes, BUFFER_WINDOW).await.unwrap();
            api = api.with_buffer(started.buffer());
            drain = Some(started);
        }
        Self {
            api,
            commits,
            drain,
        }
    }

    /// The same, its buffer refusing every `every`th POST (from the first),
    /// as a throttled Kinesis shard does: those are written directly.
    fn refusing(mut self, every: usize) -> Self {
        if let Some(drain) = &self.drain {
            let refusing = Refusing {
                inner: drain.buffer(),
                every,
                seen: AtomicUsize::new(0),
            };
            self.api = self.api.with_buffer(Arc::new(refusing));
        }
        self
    }

    /// Stops at once, as `kill -9` would.
    async fn kill(self) {
        if let Some(drain) = self.drain {
            drain.kill().await;
        }
        self.commits.kill().await;
    }

    /// Posts `body` with `key` (none: a POST the buffer may take); the
    /// status and answer.
    async fn post(&self, table: &str, key: Option<&str>, body: String, wait: bool) -> (u16, Value) {
        let (ns, name) = table.split_once('.').unwrap();
        let query = if wait { "?wait=commit" } else { "" };
        let mut req = http::Request::post(format!("/v1/tables/{ns}/{name}/records{query}"));
        if let Some(key) = key {
            req = req.header("idempotency-key", key);
        }
        let mut req = req
            .header("content-type", "application/x-ndjson")
            .body(Bytes::from(body))
            .unwrap();
        req.extensions_mut().insert(IamCaller);
        let res = self.api.handle(req).await;
        let answer = serde_json::from_slice(res.body()).unwrap_or(Value::Null);
        (res.status().as_u16(), answer)
    }
}

/// A buffer that refuses some POSTs outright, as a Kinesis shard over its
/// write limit does.
#[derive(Debug)]
struct Refusing {
    inner: Arc<dyn Buffer>,
    every: usize,
    seen: AtomicUsize,
}

#[async_trait]
impl Buffer for Refusing {
    async fn append(&self, post: Bytes) -> Result<(), BufferError> {
        if self
            .seen
            .fetch_add(1, Ordering::SeqCst)
            .is_multiple_of(self.every)
        {
            return Err(BufferError {
                buffer: "the harness's throttled buffer".into(),
                refused: true,
                source: "over the shard's write limit".into(),
            });
        }
        self.inner.append(post).await
    }
}

/// A POST as sent: its key, body and what it changes, and the incarnation
/// of the table it was written to.
#[derive(Debug, Clone)]
struct Post {
    key: String,
    batch: Batch,
    incarnation: usize,
}

impl Post {
    /// Fails unless the answer is what the model expects: 200 or 202, and
    /// 400 naming each bad record (the others written) when it has some
    /// (a keyed bad change followed by one of its key may be folded away).
    fn check(&self, status: u16, answer: &Value) -> Result<(), String> {
        match self.batch.written_as_answered(status, answer) {
            true => Ok(()),
            false => Err(format!("POST {} answered {status} {answer}", self.key)),
        }
    }
}

/// A schedule's run: the warehouse, the model and what was sent.
struct Run {
    seed: u64,
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    rng: Rng,
    records: Gen,
    keyed: bool,
    format_version: u8,
    table: TableIdent,
    model: Model,
    /// The table's incarnation (drop and create again starts a new one).
    incarnation: usize,
    inputs: Vec<(PathBuf, Batch)>,
    posts: Vec<Post>,
    /// Posts answered but maybe not committed yet, in receipt order.
    pending: Vec<Post>,
    /// Buffered posts were answered since the last settle.
    buffered: bool,
    /// `floe serve` buffers POSTs without a key (from the first buffered
    /// step on: a deployment's setting, so every later start drains too).
    buffering: bool,
    serve: Option<Serve>,
    broken: Arc<AtomicBool>,
    /// The second table's model, written only by the concurrent step.
    sibling: Option<(TableIdent, Rows)>,
    trace: Vec<String>,
    counts: Counts,
    /// How far this schedule moved the process's clock back.
    shifted: i64,
}

/// What the schedules did, for the closing line.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    /// Schedules run.
    pub schedules: usize,
    /// Steps of each kind.
    pub steps: BTreeMap<&'static str, usize>,
    /// Ingests that died at a fault point, by point.
    pub crashes: BTreeMap<&'static str, usize>,
    /// Records expected in a dead-letter location.
    pub dead_letters: usize,
    /// Keyed HTTP changes committed after a newer one was.
    pub late_posts: usize,
    /// Tables compared with the model.
    pub tables: usize,
    /// Wall time spent in each kind of step.
    pub time: BTreeMap<&'static str, Duration>,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.schedules += other.schedules;
        self.tables += other.tables;
        self.dead_letters += other.dead_letters;
        self.late_posts += other.late_posts;
        for (k, v) in other.steps {
            *self.steps.entry(k).or_default() += v;
        }
        for (k, v) in other.time {
            *self.time.entry(k).or_default() += v;
        }
        for (k, v) in other.crashes {
            *self.crashes.entry(k).or_default() += v;
        }
    }
}

impl Run {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x09A0_D0C7);
        let keyed = rng.chance(50);
        let format_version = if rng.chance(33) { 3 } else { 2 };
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let tmp = match std::env::var("FLOE_HARNESS_KEEP") {
            Ok(_) => {
                println!("seed {seed}: warehouse kept at {}", tmp.keep().display());
                None
            }
            Err(_) => Some(tmp),
        };
        Self {
            seed,
            dir,
            _tmp: tmp,
            records: Gen {
                rng: Rng::new(seed ^ 0x5EED),
                keyed,
                next_id: 0,
                shapes: Shapes::default(),
                counter: 0,
            },
            rng,
            keyed,
            format_version,
            table: parse_table("p.t").unwrap(),
            model: Model::default(),
            incarnation: 0,
            inputs: Vec::new(),
            posts: Vec::new(),
            pending: Vec::new(),
            buffered: false,
            buffering: false,
            serve: None,
            broken: Arc::new(AtomicBool::new(false)),
            sibling: None,
            trace: Vec::new(),
            counts: Counts::default(),
            shifted: 0,
        }
    }

    fn step(&mut self, what: &'static str, detail: String) {
        *self.counts.steps.entry(what).or_default() += 1;
        self.trace.push(format!("{what}: {detail}"));
    }

    async fn embedded(&self, faults: Faults) -> Embedded {
        Embedded::from_deployment(&process(&self.dir, faults, None).await)
    }

    /// Creates the table (again): nested columns from the start, so records
    /// evolve them; small commit retries, so a dead process gives up soon.
    async fn create(&mut self, ident: &TableIdent, keyed: bool) {
        let schema = format!(
            r#"{{"type":"struct","schema-id":0,{}"fields":[
              {{"id":1,"name":"id","required":true,"type":"long"}},
              {{"id":2,"name":"v","required":false,"type":"string"}},
              {{"id":3,"name":"s","required":false,"type":{{"type":"struct","fields":[
                {{"id":4,"name":"a","required":false,"type":"int"}}]}}}},
              {{"id":5,"name":"l","required":false,"type":{{"type":"list","element-id":6,"element-required":false,"element":
                {{"type":"struct","fields":[{{"id":7,"name":"x","required":false,"type":"string"}}]}}}}}},
              {{"id":8,"name":"m","required":false,"type":{{"type":"map","key-id":9,"key":"string","value-id":10,"value-required":false,"value":
                {{"type":"struct","fields":[{{"id":11,"name":"y","required":false,"type":"long"}}]}}}}}}]}}"#,
            if keyed {
                r#""identifier-field-ids":[1],"#
            } else {
                ""
            }
        );
        let properties = [
            ("commit.retry.num-retries", "1"),
            ("commit.retry.min-wait-ms", "1"),
            ("commit.retry.max-wait-ms", "5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let mut creation = tabledef::creation(
            &ident.name,
            tabledef::parse_schema(&schema).unwrap(),
            Default::default(),
            properties,
        );
        if self.format_version == 3 {
            creation.format_version = floe_core::iceberg::spec::FormatVersion::V3;
        }
        self.embedded(Faults::none())
            .await
            .create_table(ident, creation)
            .await
            .unwrap();
    }

    /// Applies `batch` to `rows` (and counts its dead letters).
    fn apply(rows: &mut Rows, batch: &Batch, counts: &mut Counts) {
        for effect in &batch.effects {
            match effect {
                Some((id, Some(row))) => {
                    rows.insert(*id, row.clone());
                }
                Some((id, None)) => {
                    rows.remove(id);
                }
                None => counts.dead_letters += 1,
            }
        }
    }

    /// Remembers the state at the table's current snapshot.
    async fn mark(&mut self) {
        let loaded = self
            .embedded(Faults::none())
            .await
            .catalog()
            .load_table(&self.table)
            .await
            .unwrap();
        if let Some(s) = loaded.metadata.current_snapshot_id() {
            let step = self.counts.steps.values().sum();
            let m = &mut self.model;
            m.history.push((s, m.rows.clone(), m.inputs.clone(), step));
        }
    }

    /// Ingests input `i` as `floe ingest FILE` does, in a process that may
    /// die at `fault`; a dead process's input is run again, after a ledger
    /// repair when `repair`.
    async fn ingest(&mut self, i: usize, fault: Option<(FaultPoint, u64)>, repair: bool) {
        let (path, batch) = self.inputs[i].clone();
        let opts = IngestOptions {
            writers: 1 + self.rng.below(2),
            batch_records: 1 + self.rng.below(8) as u64,
            commit_window: Duration::from_millis(self.rng.below(30) as u64),
            ..Default::default()
        };
        let faults = match fault {
            Some((point, nth)) => Faults::at(point, FaultMode::Error, nth),
            None => Faults::none(),
        };
        let new = !self.model.inputs.contains(&i);
        let ran = self
            .embedded(faults)
            .await
            .ingest(Some(&self.table), vec![Input::file(&path).unwrap()], &opts)
            .await;
        if let (Ok(report), true) = (&ran, new) {
            let (least, most) = batch.dead_letters();
            assert!(
                (least..=most).contains(&report.rejected.len()),
                "seed {}: input {i} dead-lettered {:?}, the model {least} to {most}\n{}\n{}",
                self.seed,
                report.rejected,
                batch.lines.join("\n"),
                self.trace.join("\n")
            );
        }
        if let Ok(report) = &ran {
            self.trace.push(format!(
                "  {} commits, {} records, {} duplicates",
                report.commits, report.records_committed, report.duplicates
            ));
        }
        if let Err(e) = ran {
            let point = fault.map_or("none", |(p, _)| p.name());
            *self.counts.crashes.entry(point).or_default() += 1;
            self.trace.push(format!("  died: {e}"));
            if repair {
                self.repair().await;
            }
            let again = self
                .embedded(Faults::none())
                .await
                .ingest(Some(&self.table), vec![Input::file(&path).unwrap()], &opts)
                .await;
            assert!(
                again.is_ok(),
                "seed {}: the rerun of input {i} failed: {:?}",
                self.seed,
                again.err()
            );
            self.trace.push("  run again".into());
        }
        if self.model.inputs.insert(i) {
            Self::apply(&mut self.model.rows, &batch, &mut self.counts);
        }
    }

    /// `floe ledger repair`.
    async fn repair(&mut self) {
        let deployment = process(&self.dir, Faults::none(), None).await;
        let rebuilt = deployment.engine().repair_ledger(&self.table).await;
        assert!(
            rebuilt.is_ok(),
            "seed {}: repair failed: {:?}",
            self.seed,
            rebuilt.err()
        );
        self.trace.push("  ledger repaired".into());
    }

    /// Drains the serve process's spool: what was answered is committed.
    async fn settle(&mut self) {
        if let Some(serve) = self.serve.take() {
            if let Some(drain) = serve.drain {
                let left = drain.stop().await.unwrap();
                assert_eq!(left, 0, "seed {}: the buffer kept {left} posts", self.seed);
            }
            let left = serve.commits.stop().await.unwrap();
            assert_eq!(left.queued, 0, "seed {}: spool left {left:?}", self.seed);
            self.trace.push("  serve stopped, spool drained".into());
        }
        self.pending.clear();
        self.buffered = false;
    }

    /// True while something answered may not be committed yet.
    fn unsettled(&self) -> bool {
        !self.pending.is_empty() || self.buffered
    }

    async fn serve(&mut self) -> &Serve {
        if self.serve.is_none() {
            let buffer = self.buffering.then(Faults::none);
            self.serve =
                Some(Serve::start(&self.dir, self.broken.clone(), SERVE_WINDOW, buffer).await);
        }
        self.serve.as_ref().unwrap()
    }

    /// A new POST (its key never sent before), maybe while commits fail;
    /// one that fails is followed by a newer change of its keys.
    async fn post(&mut self, wait: bool, failing: bool) {
        let post = self.new_post();
        self.send(post.clone(), wait && !failing, failing).await;
        if failing && let Some(newer) = self.newer(&post) {
            // Committed while the failed one waits for its retry: the retry
            // must not undo it.
            self.send(newer, true, false).await;
        }
    }

    /// A POST of a few new records under a new key.
    fn new_post(&mut self) -> Post {
        let batch = self.post_batch();
        self.keyed_post(batch)
    }

    /// A few new records as an HTTP body carries them.
    fn post_batch(&mut self) -> Batch {
        let n = 1 + self.rng.below(4);
        let batch = self.records.batch(n);
        // HTTP bodies carry rows; keyed deletes go by files.
        Batch {
            lines: batch
                .lines
                .iter()
                .map(|l| {
                    let mut v: Value = serde_json::from_str(l).unwrap();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("_op");
                    }
                    v.to_string()
                })
                .collect(),
            effects: batch
                .effects
                .iter()
                .map(|e| match e {
                    Some((id, None)) => Some((*id, Some(json!({"id": id})))),
                    other => other.clone(),
                })
                .collect(),
        }
    }

    /// A POST of newer changes of the keys `post` changed, under a new key.
    fn newer(&mut self, post: &Post) -> Option<Post> {
        let ids: BTreeSet<i64> = post
            .batch
            .effects
            .iter()
            .flatten()
            .map(|(id, _)| *id)
            .collect();
        let mut newer = Batch {
            lines: Vec::new(),
            effects: Vec::new(),
        };
        for id in ids {
            let (line, effect) = self.records.row(id);
            newer.lines.push(line.to_string());
            newer.effects.push(effect);
        }
        (!newer.lines.is_empty()).then(|| self.keyed_post(newer))
    }

    /// `batch` under a new Idempotency-Key, remembered for resends.
    fn keyed_post(&mut self, batch: Batch) -> Post {
        let post = Post {
            key: format!("k{}-{}", self.seed, self.records.counter),
            batch,
            incarnation: self.incarnation,
        };
        self.posts.push(post.clone());
        post
    }

    /// Sends `post` to the serve process; the model takes it in receipt order.
    async fn send(&mut self, post: Post, wait: bool, failing: bool) {
        if failing {
            self.broken.store(true, Ordering::SeqCst);
        }
        let table = floe_core::ident::display(&self.table);
        let body = post.batch.lines.join("\n");
        let seed = self.seed;
        let (mut status, mut answer) = self
            .serve()
            .await
            .post(&table, Some(&post.key), body.clone(), wait)
            .await;
        if failing {
            // Its commit is tried and fails before the storage comes back
            // (the committer looks at the spool every 200 ms when idle).
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.broken.store(false, Ordering::SeqCst);
            self.counts.late_posts += 1;
            // A 503 (a schema change could not commit) is retried with its
            // key, as the answer asks: that receipt is the one that counts.
            if status == 503 {
                self.trace.push(format!("  {} -> 503, retried", post.key));
                (status, answer) = self
                    .serve()
                    .await
                    .post(&table, Some(&post.key), body, wait)
                    .await;
            }
        }
        if let Err(e) = post.check(status, &answer) {
            panic!("seed {seed}: {e}\n{}", self.trace.join("\n"));
        }
        self.trace.push(format!(
            "  {} {} -> {status} {answer}",
            post.key,
            post.batch.lines.join(" ")
        ));
        let committed = answer["committed"].as_bool() == Some(true);
        if !committed {
            self.pending.push(post.clone());
        }
        Self::apply(&mut self.model.rows, &post.batch, &mut self.counts);
    }

    /// POSTs without a key to a `floe serve` that buffers them, whose
    /// writer may fail at a fault point (the window is written again, with
    /// the POSTs that came since); now and then the process is killed (-9)
    /// while windows are in flight, and a new one drains what it left.
    async fn buffered_posts(&mut self) {
        if let Some(serve) = self.serve.take() {
            serve.kill().await;
        }
        let fault = self.rng.chance(50).then(|| {
            let p = [FaultPoint::AfterUpload, FaultPoint::AfterEnqueue][self.rng.below(2)];
            (p, 1 + self.rng.below(3) as u64)
        });
        let faults = match fault {
            Some((p, nth)) => {
                let at = match p {
                    FaultPoint::AfterUpload => "buffer writer after_upload",
                    _ => "buffer writer after_enqueue",
                };
                *self.counts.crashes.entry(at).or_default() += 1;
                Faults::at(p, FaultMode::Error, nth)
            }
            None => Faults::none(),
        };
        self.trace
            .push(format!("  buffered serve, writer fault {fault:?}"));
        self.buffering = true;
        let mut serve =
            Serve::start(&self.dir, self.broken.clone(), SERVE_WINDOW, Some(faults)).await;
        let refuse = self.rng.chance(40).then(|| 1 + self.rng.below(3));
        if let Some(every) = refuse {
            self.trace
                .push(format!("  the buffer refuses every {every}th POST"));
            serve = serve.refusing(every);
        }
        let table = floe_core::ident::display(&self.table);
        for _ in 0..1 + self.rng.below(4) {
            let batch = self.post_batch();
            let body = batch.lines.join("\n");
            let (status, answer) = serve.post(&table, None, body, false).await;
            let buffered = answer["buffered"] == json!(true);
            assert!(
                match buffered {
                    true => status == 200,
                    false => refuse.is_some() && batch.written_as_answered(status, &answer),
                },
                "seed {}: a buffered POST answered {status} {answer}\n{}",
                self.seed,
                self.trace.join("\n")
            );
            let way = match buffered {
                true => "buffered",
                false => "refused, written directly",
            };
            *self.counts.steps.entry(way).or_default() += 1;
            self.trace
                .push(format!("  {} -> {way}", batch.lines.join(" ")));
            Self::apply(&mut self.model.rows, &batch, &mut self.counts);
            self.buffered = true;
            if self.rng.chance(30) {
                tokio::time::sleep(BUFFER_WINDOW).await;
            }
        }
        self.serve = Some(serve);
        if self.rng.chance(50) {
            // Killed in the middle of whatever it was doing.
            let ms = self.rng.below(3 * BUFFER_WINDOW.as_millis() as usize) as u64;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if let Some(serve) = self.serve.take() {
                serve.kill().await;
            }
            self.trace.push(format!("  killed after {ms} ms"));
            *self.counts.crashes.entry("buffer kill -9").or_default() += 1;
            let again = Serve::start(
                &self.dir,
                self.broken.clone(),
                RESTART_WINDOW,
                Some(Faults::none()),
            );
            self.serve = Some(again.await);
        }
    }

    /// Sends an earlier POST again with its key: answered from its record
    /// while its table lives, written anew into a table created since.
    async fn resend(&mut self) {
        // Often one still waiting for its commit (a failed one's included).
        let from = match self.rng.chance(50) && !self.pending.is_empty() {
            true => &self.pending,
            false => &self.posts,
        };
        let Some(post) = from.get(self.rng.below(from.len())).cloned() else {
            return;
        };
        let again = post.incarnation != self.incarnation;
        // Now and then past the key's window: the table's ledger decides.
        let lapsed = self.rng.chance(25);
        if lapsed {
            clock::shift(floe_core::ledger::DEFAULT_KEY_WINDOW_MS + 60_000);
        }
        self.trace.push(format!(
            "  resend {} ({}{})",
            post.key,
            if again {
                "to a new table"
            } else {
                "same table"
            },
            if lapsed {
                ", its key window passed"
            } else {
                ""
            }
        ));
        let table = floe_core::ident::display(&self.table);
        let body = post.batch.lines.join("\n");
        let seed = self.seed;
        let (status, answer) = self
            .serve()
            .await
            .post(&table, Some(&post.key), body, true)
            .await;
        self.trace.push(format!("  -> {status} {answer}"));
        if let Err(e) = post.check(status, &answer) {
            panic!("seed {seed}: {e}\n{}", self.trace.join("\n"));
        }
        if again {
            Self::apply(&mut self.model.rows, &post.batch, &mut self.counts);
            let mut post = post;
            post.incarnation = self.incarnation;
            if answer["committed"].as_bool() != Some(true) {
                self.pending.push(post.clone());
            }
            let i = self.posts.iter().position(|p| p.key == post.key).unwrap();
            self.posts[i] = post;
        }
    }

    /// `floe serve` killed (-9) and started again with its clock moved;
    /// on a keyed table, often with a change acknowledged just before the
    /// kill and a newer one of its keys just after: both wait in the spool
    /// and commit together, in the order they were received.
    async fn restart(&mut self) {
        let around = self.keyed && self.rng.chance(60);
        let before = match around {
            true => {
                let post = self.new_post();
                self.send(post.clone(), false, false).await;
                Some(post)
            }
            false => None,
        };
        if let Some(serve) = self.serve.take() {
            serve.kill().await;
        }
        // Back within the skew floe allows (2 minutes, shared by the
        // schedules running at once), forward any way.
        let shift = match self.rng.below(3) {
            0 => -30_000,
            1 => -(1 + self.rng.below(39) as i64) * 1000,
            _ => (1 + self.rng.below(3600) as i64) * 1000,
        };
        clock::shift(shift);
        self.shifted += shift.min(0);
        self.trace.push(format!("  killed; clock moved {shift} ms"));
        // A window long enough that what the spool held and what comes
        // next commit together.
        let buffer = self.buffering.then(Faults::none);
        self.serve =
            Some(Serve::start(&self.dir, self.broken.clone(), RESTART_WINDOW, buffer).await);
        if let Some(newer) = before.and_then(|p| self.newer(&p)) {
            self.send(newer, false, false).await;
        }
    }

    /// Another engine's `rollback_to_snapshot` to the snapshot an earlier
    /// step ended at, when it still exists.
    async fn rollback(&mut self) {
        let catalog = self.embedded(Faults::none()).await.catalog();
        let base = catalog.load_table(&self.table).await.unwrap();
        let alive: Vec<usize> = (0..self.model.history.len())
            .filter(|i| {
                let id = self.model.history[*i].0;
                base.metadata.snapshot_by_id(id).is_some()
                    && base.metadata.current_snapshot_id() != Some(id)
            })
            .collect();
        let Some(&i) = alive.get(self.rng.below(alive.len())) else {
            self.trace.push("  nothing to roll back to".into());
            return;
        };
        let (id, rows, inputs, step) = self.model.history[i].clone();
        let undone: Vec<usize> = self.model.inputs.difference(&inputs).copied().collect();
        let held = self.model.inputs.intersection(&inputs).count();
        crate::harness::roll_back(catalog.as_ref(), &self.table, id).await;
        self.model.rows = rows;
        self.model.inputs = inputs;
        // The undone keys are not sent again: an idempotency key is the
        // request, and the user who rolled it back sends the fix anew.
        self.posts.retain(|p| p.incarnation != self.incarnation);
        self.trace.push(format!(
            "  main rolled back to {id} (the end of step {step}: {held} inputs kept, {undone:?} undone)"
        ));
        // The user who rolled a bad input back sends it (fixed) again.
        if let Some(&again) = undone.get(self.rng.below(undone.len()))
            && self.rng.chance(70)
        {
            self.trace.push(format!("  input {again} sent again"));
            self.ingest(again, None, false).await;
        }
    }

    /// `floe table drop [--purge]` and `floe table create`.
    async fn recreate(&mut self, purge: bool) {
        let catalog = self.embedded(Faults::none()).await.catalog();
        let loaded = catalog.load_table(&self.table).await.unwrap();
        catalog.drop_table(&self.table).await.unwrap();
        if purge {
            let file_io = catalog.file_io().clone();
            for dir in [
                format!("{}/", loaded.metadata.location().trim_end_matches('/')),
                format!("{}/", floe_core::ledger::place::dir(&loaded.metadata)),
            ] {
                file_io.delete_prefix(&dir).await.unwrap();
            }
        }
        let table = self.table.clone();
        self.create(&table, self.keyed).await;
        self.incarnation += 1;
        self.model = Model::default();
        self.trace.push(format!(
            "  dropped{}, created again",
            if purge { " and purged" } else { "" }
        ));
    }

    /// `floe maintain`: compaction, expiry of every snapshot but the
    /// current, orphan cleanup of what is old.
    async fn maintain(&mut self) {
        let catalog = self.embedded(Faults::none()).await.catalog();
        let opts = MaintainOptions {
            max_snapshot_age_ms: Some(if self.rng.chance(50) { 0 } else { 3_600_000 }),
            orphan_window_ms: 24 * 3_600_000,
            now_ms: clock::now_ms(),
            ..Default::default()
        };
        let done = maintain::maintain(&catalog, &self.table, &opts).await;
        assert!(
            done.is_ok(),
            "seed {}: maintain failed: {}",
            self.seed,
            done.err().map(|e| e.to_string()).unwrap_or_default()
        );
    }

    /// Two processes ingest standard input at once, into this table and a
    /// second one; then the first is run again (a retry after a timeout).
    async fn concurrent(&mut self) {
        let sibling = parse_table("p.u").unwrap();
        if self.sibling.is_none() {
            self.create(&sibling, false).await;
            self.sibling = Some((sibling.clone(), Rows::new()));
        }
        // New ids only (inserts, on a keyed table too); every stdin of the
        // warehouse shares one checkpoint.
        let keyed = std::mem::replace(&mut self.records.keyed, false);
        let mine = self.records.batch(2 + self.rng.below(6));
        let theirs = self.records.batch(2 + self.rng.below(6));
        self.records.keyed = keyed;
        let stdin = |b: &Batch| {
            let bytes = (b.lines.join("\n") + "\n").into_bytes();
            Input::new("stdin", SourceKind::File, std::io::Cursor::new(bytes))
        };
        let opts = IngestOptions {
            batch_records: 2,
            commit_window: Duration::from_millis(5),
            ..Default::default()
        };
        let (a, b) = (
            self.embedded(Faults::none()).await,
            self.embedded(Faults::none()).await,
        );
        let target = &self.table;
        let (one, two) = tokio::join!(
            a.ingest(Some(target), vec![stdin(&mine)], &opts),
            b.ingest(Some(&sibling), vec![stdin(&theirs)], &opts),
        );
        assert!(
            one.is_ok() && two.is_ok(),
            "seed {}: {one:?} {two:?}",
            self.seed
        );
        let again = a.ingest(Some(target), vec![stdin(&mine)], &opts).await;
        assert!(again.is_ok(), "seed {}: {again:?}", self.seed);
        let rows = &mut self.sibling.as_mut().unwrap().1;
        Self::apply(rows, &theirs, &mut self.counts);
        Self::apply(&mut self.model.rows, &mine, &mut self.counts);
    }

    /// A new input file, ingested by a process that may die at a fault
    /// point (then repaired or not, and run again).
    async fn new_input(&mut self) {
        let n = 2 + self.rng.below(20);
        let batch = self.records.batch(n);
        let path = self.dir.join(format!("in-{}.ndjson", self.inputs.len()));
        std::fs::write(&path, batch.lines.join("\n") + "\n").unwrap();
        self.inputs.push((path, batch));
        let fault = self.rng.chance(40).then(|| {
            let p = FaultPoint::ALL[self.rng.below(FaultPoint::ALL.len())];
            (p, 1 + self.rng.below(3) as u64)
        });
        let repair = self.rng.chance(50);
        self.step(
            "ingest",
            format!(
                "input {} ({n} lines), fault {fault:?}, repair {repair}",
                self.inputs.len() - 1
            ),
        );
        self.ingest(self.inputs.len() - 1, fault, repair).await;
    }

    /// One drawn step, timed.
    async fn next(&mut self) {
        let started = std::time::Instant::now();
        let before = self.trace.len();
        // Replaying a schedule alone, the clock does not move as the
        // schedules beside it move it in a full run; this moves it between
        // steps instead.
        if let Some(tick) = std::env::var(TICK_ENV).ok().and_then(|v| v.parse().ok()) {
            clock::shift(tick);
        }
        self.one().await;
        if let Some(kind) = self.trace.get(before).and_then(|t| t.split(':').next()) {
            let kind = *self
                .counts
                .steps
                .keys()
                .find(|k| **k == kind)
                .unwrap_or(&"other");
            *self.counts.time.entry(kind).or_default() += started.elapsed();
        }
    }

    async fn one(&mut self) {
        // A step other than a POST first lets what serve answered commit.
        let roll = self.rng.below(100);
        if roll >= 45 && self.unsettled() {
            self.settle().await;
        }
        match roll {
            0..=5 => {
                self.step("buffered posts", String::new());
                self.buffered_posts().await;
            }
            6..=24 => {
                let wait = self.rng.chance(50);
                let failing = self.keyed && self.rng.chance(30);
                self.step("post", format!("wait={wait} failing={failing}"));
                self.post(wait, failing).await;
            }
            25..=32 => {
                self.step("resend", String::new());
                self.resend().await;
            }
            33..=39 => {
                self.step("restart serve", String::new());
                self.restart().await;
            }
            40..=44 => {
                // Several requests spooled by killed processes: settle.
                self.step("stop serve", String::new());
                self.settle().await;
            }
            45..=69 => self.new_input().await,
            70..=75 => {
                let Some(i) = (!self.inputs.is_empty()).then(|| self.rng.below(self.inputs.len()))
                else {
                    return;
                };
                self.step("rerun", format!("input {i}"));
                self.ingest(i, None, false).await;
            }
            76..=79 => {
                self.step("repair intact", String::new());
                self.repair().await;
            }
            80..=85 => {
                self.step("maintain", String::new());
                self.maintain().await;
            }
            86..=89 => {
                self.step("rollback", String::new());
                self.rollback().await;
            }
            90..=94 => {
                let purge = self.rng.chance(50);
                self.step("drop and create", format!("purge {purge}"));
                self.recreate(purge).await;
            }
            _ => {
                self.step("concurrent stdin", String::new());
                self.concurrent().await;
            }
        }
        if !self.unsettled() {
            self.mark().await;
        }
    }
}

/// What the readers must find: per metadata file, the seed and the rows.
struct Wanted {
    seed: u64,
    table: String,
    metadata: String,
    rows: Rows,
}

/// What a schedule left for the readers: its tables with their models, its
/// trace, and its warehouse (deleted once they read it).
struct Left {
    seed: u64,
    wanted: Vec<Wanted>,
    trace: String,
    _dir: Option<tempfile::TempDir>,
}

/// Runs one schedule; what it left, or its failure and trace.
async fn schedule(seed: u64) -> Result<(Left, Counts), String> {
    let mut run = Run::new(seed);
    let table = run.table.clone();
    run.create(&table, run.keyed).await;
    let steps = MIN_STEPS + run.rng.below(10);
    let step = async {
        for _ in 0..steps {
            run.next().await;
        }
        run.settle().await;
    };
    let outcome = tokio::time::timeout(Duration::from_secs(300), step).await;
    // Its moves back undone (forward: never back, which for the
    // schedules running beside it would be a jump beyond the skew).
    clock::shift(-run.shifted);
    if outcome.is_err() {
        return Err(format!(
            "seed {seed}: did not finish in 300 s\n{}",
            run.trace.join("\n")
        ));
    }
    let catalog = run.embedded(Faults::none()).await.catalog();
    let mut wanted = Vec::new();
    let mut tables = vec![(run.table.clone(), run.model.rows.clone())];
    tables.extend(run.sibling.clone());
    for (ident, rows) in tables {
        let loaded = catalog.load_table(&ident).await.unwrap();
        wanted.push(Wanted {
            seed,
            table: floe_core::ident::display(&ident),
            metadata: loaded
                .metadata_location
                .trim_start_matches("file://")
                .to_string(),
            rows,
        });
    }
    let mut counts = std::mem::take(&mut run.counts);
    counts.schedules = 1;
    counts.tables = wanted.len();
    let left = Left {
        seed,
        wanted,
        trace: run.trace.join("\n"),
        _dir: run._tmp.take(),
    };
    Ok((left, counts))
}

/// What a schedule's panic said.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".into())
}

/// How a reader's rows differ from the model.
fn differ(want: &Rows, got: &[Value]) -> Option<String> {
    let mut seen: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    for row in got {
        let Some(id) = row["id"].as_i64() else {
            return Some(format!("a row without id: {row}"));
        };
        seen.entry(id).or_default().push(normalize(row));
    }
    let mut out = Vec::new();
    for (id, rows) in &seen {
        match want.get(id) {
            None => out.push(format!("id {id}: not in the model: {rows:?}")),
            Some(_) if rows.len() > 1 => out.push(format!("id {id}: {} rows", rows.len())),
            Some(w) if &rows[0] != w => {
                out.push(format!("id {id}: {} where the model has {w}", rows[0]))
            }
            Some(_) => {}
        }
    }
    for id in want.keys().filter(|k| !seen.contains_key(k)) {
        out.push(format!("id {id}: lost ({})", want[id]));
    }
    (!out.is_empty()).then(|| out.join("; "))
}

/// Has DuckDB and pyiceberg read every table the schedules left, adds a
/// failure for each that differs from its model, and keeps the warehouses
/// of those schedules; how many tables each reader found equal.
fn read_back(left: &mut [Left], failures: &mut Vec<String>) -> (usize, usize) {
    let wanted: Vec<(&Wanted, &str)> = left
        .iter()
        .flat_map(|l| l.wanted.iter().map(|w| (w, l.trace.as_str())))
        .collect();
    let list = tempfile::NamedTempFile::new().unwrap();
    let paths: Vec<&String> = wanted.iter().map(|(w, _)| &w.metadata).collect();
    std::fs::write(list.path(), serde_json::to_vec(&paths).unwrap()).unwrap();
    let read = crate::services::python_json(
        "shared/tests/read_rows.py",
        &[list.path().to_str().unwrap()],
    );
    let (mut duck, mut py) = (0, 0);
    let mut differing = BTreeSet::new();
    for (w, trace) in &wanted {
        let got = &read[w.metadata.as_str()];
        for reader in ["duckdb", "pyiceberg"] {
            let Some(rows) = got[reader].as_array() else {
                continue;
            };
            match differ(&w.rows, rows) {
                Some(d) => {
                    differing.insert(w.seed);
                    failures.push(format!(
                        "seed {}: {reader} reads {}: {d}\n{trace}",
                        w.seed, w.table
                    ));
                }
                None if reader == "duckdb" => duck += 1,
                None => py += 1,
            }
        }
    }
    // The warehouses of differing schedules stay, to read their files.
    for l in left.iter_mut().filter(|l| differing.contains(&l.seed)) {
        if let Some(dir) = l._dir.take() {
            println!(
                "seed {}: warehouse kept at {}",
                l.seed,
                dir.keep().display()
            );
        }
    }
    (duck, py)
}

/// Runs every seed, has DuckDB and pyiceberg read every table it left, and
/// fails naming each schedule whose tables differ from the model.
pub async fn run_all(label: &str, seeds: &[u64]) {
    let mut counts = Counts::default();
    let mut failures = Vec::new();
    let mut left = Vec::new();
    // A few at once: most of a schedule is waiting (commit windows, a
    // committer's polls), and a failing one does not stop the others.
    let mut runs = futures::stream::iter(seeds.iter().map(|&seed| async move {
        let run = std::panic::AssertUnwindSafe(schedule(seed));
        (seed, futures::FutureExt::catch_unwind(run).await)
    }))
    .buffer_unordered(AT_ONCE);
    while let Some((seed, done)) = runs.next().await {
        match done {
            Ok(Ok((l, c))) => {
                counts.add(c);
                left.push(l);
            }
            Ok(Err(e)) => failures.push(e),
            Err(panicked) => failures.push(format!("seed {seed}: {}", panic_text(panicked))),
        }
    }
    if std::env::var("FLOE_HARNESS_SEED").is_ok() {
        for l in &left {
            println!("{}", l.trace);
        }
    }
    let (duck, py) = read_back(&mut left, &mut failures);
    let failed: BTreeSet<&str> = failures
        .iter()
        .filter_map(|f| f.split(':').next())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} schedules differ from the model (replay one with FLOE_HARNESS_SEED):\n\n{}",
        failed.len(),
        seeds.len(),
        failures.join("\n\n")
    );
    report(&format!(
        "{label}: {} schedules, {} tables; steps {:?}; deaths by fault point {:?}; {} records dead-lettered as the model predicts, {} keyed HTTP changes committed late; 0 lost, 0 doubled, 0 differ; independent readers: {duck} tables equal the model in DuckDB, {py} in pyiceberg",
        counts.schedules,
        counts.tables,
        counts.steps,
        counts.crashes,
        counts.dead_letters,
        counts.late_posts
    ));
    println!("time by step: {:?}", counts.time);
}
