//! Builds snapshots the way every floe action needs them: manifests for the
//! files a snapshot adds, a manifest list that carries the parent's manifests
//! over, a summary with standard and ledger keys, chained onto the metadata.
//! Several snapshots can be chained in one commit; each one's parent is the last.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, MAIN_BRANCH, Manifest, ManifestContentType,
    ManifestEntry, ManifestFile, ManifestList, ManifestListWriter, ManifestWriter,
    ManifestWriterBuilder, Operation, PartitionSpecRef, SchemaRef, Snapshot,
    SnapshotSummaryCollector, Summary, TableMetadata, TableMetadataBuildResult,
    TableMetadataBuilder,
};
use iceberg::{Error, ErrorKind, TableRequirement};
use uuid::Uuid;

use super::lineage;
use crate::catalog::LoadedTable;
use crate::clock::wall_ms;
use crate::write::vector::{file_key, is_vector};

/// One snapshot to add: what it changes and what its summary records.
#[derive(Debug, Default)]
pub struct SnapshotPlan {
    /// The Iceberg operation.
    pub operation: Operation,
    /// Data files the snapshot adds, with the partition spec id each was written with.
    pub added_data: Vec<(i32, DataFile)>,
    /// Delete files the snapshot adds, with their partition spec ids.
    pub added_deletes: Vec<(i32, DataFile)>,
    /// Live files the snapshot removes, by path (a deletion vector by its
    /// [`file_key`]), e.g. files a copy-on-write commit rewrote. The deletion
    /// vectors of data files it removes go with them.
    pub removed_data: Vec<String>,
    /// Removes every live data and delete file first (a TRUNCATE).
    pub truncate: bool,
    /// Rewrites the carried manifests into one per content and partition spec
    /// (maintenance), so later commits carry few.
    pub merge_manifests: bool,
    /// Data sequence number for `added_data` instead of the snapshot's own:
    /// a compaction's files keep the number of the snapshot it read, so
    /// deletes committed meanwhile still apply to them.
    pub data_sequence_number: Option<i64>,
    /// Files written while planning; removed again if the attempt loses.
    pub written: Vec<String>,
    /// Files to delete once the commit has landed: inputs it made redundant.
    pub obsolete: Vec<String>,
    /// Extra summary entries (the ledger).
    pub properties: Vec<(String, String)>,
}

/// Files written for an attempt, removed again if the attempt loses.
#[derive(Debug, Default)]
pub struct Written(Vec<String>);

impl Written {
    /// Adds files the attempt wrote outside the producer (masked request
    /// files, ledger files).
    pub fn add(&mut self, paths: impl IntoIterator<Item = String>) {
        self.0.extend(paths);
    }

    /// Deletes the files; only for attempts known not to be in the table.
    pub async fn discard(self, file_io: &FileIO) {
        for path in self.0 {
            let _ = file_io.delete(&path).await;
        }
    }
}

/// Chains snapshots onto a loaded table's metadata.
pub struct SnapshotProducer<'a> {
    file_io: &'a FileIO,
    base: &'a LoadedTable,
    builder: Option<TableMetadataBuilder>,
    parent: Option<i64>,
    manifests: Vec<ManifestFile>,
    totals: HashMap<String, u64>,
    next_seq: i64,
    /// The table's next row id (format v3 and later, which track row lineage).
    next_row_id: Option<u64>,
    last_ts: i64,
    commit_id: Uuid,
    files: u32,
    written: Written,
    snapshot_ids: Vec<i64>,
}

impl<'a> SnapshotProducer<'a> {
    /// Starts from the table's current state (reads the current manifest list).
    pub async fn new(file_io: &'a FileIO, base: &'a LoadedTable) -> iceberg::Result<Self> {
        let meta = &base.metadata;
        let (manifests, totals) = match meta.current_snapshot() {
            Some(s) => {
                let bytes = file_io.new_input(s.manifest_list())?.read().await?;
                let list = ManifestList::parse_with_version(&bytes, meta.format_version())?;
                (
                    list.consume_entries().into_iter().collect(),
                    totals_of(s.summary()),
                )
            }
            None => (Vec::new(), HashMap::new()),
        };
        Ok(Self {
            file_io,
            base,
            builder: Some(TableMetadataBuilder::new_from_metadata(
                (**meta).clone(),
                Some(base.metadata_location.clone()),
            )),
            parent: meta.current_snapshot_id(),
            manifests,
            totals,
            next_seq: meta.next_sequence_number(),
            next_row_id: (meta.format_version() >= FormatVersion::V3).then(|| meta.next_row_id()),
            last_ts: meta.last_updated_ms(),
            commit_id: Uuid::now_v7(),
            files: 0,
            written: Written::default(),
            snapshot_ids: Vec::new(),
        })
    }

    /// Adds one snapshot on top of the previous one; returns its id.
    pub async fn add(&mut self, mut plan: SnapshotPlan) -> iceberg::Result<i64> {
        let meta: &TableMetadata = &self.base.metadata;
        let snapshot_id = self.unique_snapshot_id();
        let seq = self.next_seq;
        let schema = meta.current_schema().clone();

        let mut collector = SnapshotSummaryCollector::default();
        let mut new_manifests = self
            .write_added(snapshot_id, &schema, &mut plan, &mut collector)
            .await?;

        if plan.truncate || plan.merge_manifests || !plan.removed_data.is_empty() {
            let removed: HashSet<&str> = plan.removed_data.iter().map(String::as_str).collect();
            let only = (!plan.truncate).then_some(&removed);
            let mut rewritten = self
                .rewrite_carried(
                    snapshot_id,
                    &schema,
                    only,
                    plan.merge_manifests,
                    &mut collector,
                )
                .await?;
            new_manifests.append(&mut rewritten);
        }
        self.written.0.extend(plan.written);

        let mut summary = collector.build();
        self.accumulate_totals(&mut summary);
        summary.extend(plan.properties);

        let (list_path, row_range) = self.write_list(snapshot_id, seq, new_manifests).await?;

        let ts = wall_ms().max(self.last_ts + 1);
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(self.parent)
            .with_sequence_number(seq)
            .with_timestamp_ms(ts)
            .with_manifest_list(list_path)
            .with_schema_id(meta.current_schema_id())
            .with_summary(Summary {
                operation: plan.operation,
                additional_properties: summary,
            });
        let snapshot = match row_range {
            Some((first, added)) => snapshot.with_row_range(first, added).build(),
            None => snapshot.build(),
        };
        let builder = self.builder.take().ok_or_else(finished)?;
        self.builder = Some(builder.set_branch_snapshot(snapshot, MAIN_BRANCH)?);
        self.parent = Some(snapshot_id);
        self.next_seq += 1;
        self.last_ts = ts;
        self.snapshot_ids.push(snapshot_id);
        Ok(snapshot_id)
    }

    /// Writes the plan's added data and delete files into new manifests, one
    /// per content and partition spec, counting them into `collector`.
    async fn write_added(
        &mut self,
        snapshot_id: i64,
        schema: &SchemaRef,
        plan: &mut SnapshotPlan,
        collector: &mut SnapshotSummaryCollector,
    ) -> iceberg::Result<Vec<ManifestFile>> {
        let meta = &self.base.metadata;
        let mut new_manifests = Vec::new();
        for (content, files) in [
            (DataContentType::Data, std::mem::take(&mut plan.added_data)),
            (
                DataContentType::EqualityDeletes,
                std::mem::take(&mut plan.added_deletes),
            ),
        ] {
            let mut by_spec: BTreeMap<i32, Vec<DataFile>> = BTreeMap::new();
            for (spec_id, f) in files {
                by_spec.entry(spec_id).or_default().push(f);
            }
            for (spec_id, files) in by_spec {
                let spec = meta.partition_spec_by_id(spec_id).ok_or_else(|| {
                    Error::new(
                        ErrorKind::DataInvalid,
                        format!("data file for unknown partition spec {spec_id}"),
                    )
                })?;
                let (path, mut writer) =
                    self.manifest_writer(snapshot_id, schema, spec, content)?;
                // A negative sequence number leaves it to be inherited from
                // the manifest list, as the spec intends for added files.
                let seq = match content {
                    DataContentType::Data => plan.data_sequence_number.unwrap_or(-1),
                    _ => -1,
                };
                for f in files {
                    collector.add_file(&f, schema.clone(), spec.clone());
                    writer.add_file(f, seq)?;
                }
                self.written.0.push(path);
                new_manifests.push(writer.write_manifest_file().await?);
            }
        }
        Ok(new_manifests)
    }

    /// Writes the new snapshot's manifest list: `new_manifests` first
    /// (readers plan newest files first, as Java does), then the carried
    /// ones, which it then replaces as the producer's list. On v3 it hands
    /// out the snapshot's row ids; returns the list's path and that range
    /// (first row id, rows added).
    async fn write_list(
        &mut self,
        snapshot_id: i64,
        seq: i64,
        mut new_manifests: Vec<ManifestFile>,
    ) -> iceberg::Result<(String, Option<(u64, u64)>)> {
        let meta = &self.base.metadata;
        let list_path = format!(
            "{}/metadata/snap-{snapshot_id}-1-{}.avro",
            meta.location().trim_end_matches('/'),
            self.commit_id
        );
        new_manifests.append(&mut self.manifests);
        let first_row_id = self.next_row_id;
        let row_range = match first_row_id {
            Some(first) => {
                let next = lineage::assign(&mut new_manifests, first)?;
                self.next_row_id = Some(next);
                Some((first, next - first))
            }
            None => None,
        };
        let out = self.file_io.new_output(&list_path)?.writer().await?;
        let mut list = match meta.format_version() {
            FormatVersion::V1 => ManifestListWriter::v1(out, snapshot_id, self.parent),
            FormatVersion::V2 => ManifestListWriter::v2(out, snapshot_id, self.parent, seq),
            FormatVersion::V3 => {
                ManifestListWriter::v3(out, snapshot_id, self.parent, seq, first_row_id)
            }
        };
        list.add_manifests(new_manifests.clone().into_iter())?;
        list.close().await?;
        self.written.0.push(list_path.clone());
        // Carried manifests keep their numbers; the new ones took `seq` in the list.
        self.manifests = new_manifests
            .into_iter()
            .map(|mut m| {
                if m.sequence_number < 0 {
                    m.sequence_number = seq;
                }
                if m.min_sequence_number < 0 {
                    m.min_sequence_number = seq;
                }
                m
            })
            .collect();
        Ok((list_path, row_range))
    }

    /// Sets table properties in the same commit (the ledger head it names).
    pub fn set_properties(&mut self, properties: HashMap<String, String>) -> iceberg::Result<()> {
        let builder = self.builder.take().ok_or_else(finished)?;
        self.builder = Some(builder.set_properties(properties)?);
        Ok(())
    }

    /// The new metadata, the requirements that must hold, and the files written.
    pub fn finish(
        self,
    ) -> iceberg::Result<(
        TableMetadataBuildResult,
        Vec<TableRequirement>,
        Written,
        Vec<i64>,
    )> {
        let meta = &self.base.metadata;
        let requirements = vec![
            TableRequirement::UuidMatch { uuid: meta.uuid() },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: MAIN_BRANCH.to_string(),
                snapshot_id: meta.current_snapshot_id(),
            },
        ];
        Ok((
            self.builder.ok_or_else(finished)?.build()?,
            requirements,
            self.written,
            self.snapshot_ids,
        ))
    }

    fn manifest_writer(
        &mut self,
        snapshot_id: i64,
        schema: &SchemaRef,
        spec: &PartitionSpecRef,
        content: DataContentType,
    ) -> iceberg::Result<(String, ManifestWriter)> {
        let path = self.next_path(&format!("{}-m", self.commit_id), "avro");
        let builder = ManifestWriterBuilder::new(
            self.file_io.new_output(&path)?,
            Some(snapshot_id),
            schema.clone(),
            spec.as_ref().clone(),
        );
        let writer = match (self.base.metadata.format_version(), content) {
            (FormatVersion::V1, DataContentType::Data) => builder.build_v1(),
            (FormatVersion::V1, _) => {
                return Err(Error::new(
                    ErrorKind::FeatureUnsupported,
                    "delete files need table format v2",
                ));
            }
            (FormatVersion::V2, DataContentType::Data) => builder.build_v2_data(),
            (FormatVersion::V2, _) => builder.build_v2_deletes(),
            (_, DataContentType::Data) => builder.build_v3_data(),
            (_, _) => builder.build_v3_deletes(),
        };
        Ok((path, writer))
    }

    /// Marks live files deleted: the files in `only`, or with `None` every
    /// data and delete file. A carried manifest that lists one is rewritten
    /// (its other entries kept as existing); with `merge`, every group of
    /// manifests of one content and spec becomes one. The new manifests are
    /// returned, to be listed in the new snapshot.
    async fn rewrite_carried(
        &mut self,
        snapshot_id: i64,
        schema: &SchemaRef,
        only: Option<&HashSet<&str>>,
        merge: bool,
        collector: &mut SnapshotSummaryCollector,
    ) -> iceberg::Result<Vec<ManifestFile>> {
        let removal = Removal { only };
        let groups = self.touched_groups(&removal, merge).await?;
        let mut rewritten = Vec::new();
        let mut found = 0;
        for ((deletes, spec_id), members) in groups {
            let untouched = |(_, manifest): &(ManifestFile, Manifest)| {
                !manifest
                    .entries()
                    .iter()
                    .any(|e| e.is_alive() && removal.removes(e))
            };
            if merge && members.len() == 1 && members.iter().all(untouched) {
                self.manifests.extend(members.into_iter().map(|(m, _)| m));
                continue;
            }
            let spec = self
                .base
                .metadata
                .partition_spec_by_id(spec_id)
                .cloned()
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::DataInvalid,
                        format!("manifest for unknown partition spec {spec_id}"),
                    )
                })?;
            let content = if deletes {
                DataContentType::EqualityDeletes
            } else {
                DataContentType::Data
            };
            // Without `merge` each touched manifest is rewritten on its own.
            let batches: Vec<Vec<(ManifestFile, Manifest)>> = if merge {
                vec![members]
            } else {
                members.into_iter().map(|m| vec![m]).collect()
            };
            for batch in batches {
                let (path, mut writer) =
                    self.manifest_writer(snapshot_id, schema, &spec, content)?;
                for (m, manifest) in &batch {
                    found += removal.rewrite(m, manifest, &mut writer, &spec, schema, collector)?;
                }
                self.written.0.push(path);
                rewritten.push(writer.write_manifest_file().await?);
            }
        }
        if let Some(set) = only.filter(|set| set.len() != found) {
            // Planned on a table that changed: the catalog would refuse the
            // commit anyway, but a silent partial removal must never be built.
            return Err(Error::new(
                ErrorKind::DataInvalid,
                format!(
                    "{} of {} files to remove are not live in the table",
                    set.len() - found,
                    set.len()
                ),
            ));
        }
        Ok(rewritten)
    }

    /// Takes the carried manifests that must be rewritten (those listing a
    /// file `removal` removes, or with `merge` every one with live files) out
    /// of the producer's list, loaded and grouped by content and spec; the
    /// rest stay carried as they are.
    async fn touched_groups(
        &mut self,
        removal: &Removal<'_>,
        merge: bool,
    ) -> iceberg::Result<BTreeMap<(bool, i32), Vec<(ManifestFile, Manifest)>>> {
        let mut groups: BTreeMap<(bool, i32), Vec<(ManifestFile, Manifest)>> = BTreeMap::new();
        for m in std::mem::take(&mut self.manifests) {
            if !(m.has_added_files() || m.has_existing_files()) {
                // Only deleted entries: a merge drops it, as nothing is live.
                if !merge {
                    self.manifests.push(m);
                }
                continue;
            }
            let manifest = m.load_manifest(self.file_io).await?;
            let touched = manifest
                .entries()
                .iter()
                .any(|e| e.is_alive() && removal.removes(e));
            if !touched && !merge {
                self.manifests.push(m);
                continue;
            }
            let key = (
                m.content == ManifestContentType::Deletes,
                m.partition_spec_id,
            );
            groups.entry(key).or_default().push((m, manifest));
        }
        Ok(groups)
    }

    fn unique_snapshot_id(&self) -> i64 {
        loop {
            let (hi, lo) = Uuid::new_v4().as_u64_pair();
            let id = ((hi ^ lo) >> 1) as i64;
            if id != 0
                && self.base.metadata.snapshot_by_id(id).is_none()
                && !self.snapshot_ids.contains(&id)
            {
                return id;
            }
        }
    }

    fn next_path(&mut self, stem: &str, ext: &str) -> String {
        self.files += 1;
        format!(
            "{}/metadata/{stem}{}.{ext}",
            self.base.metadata.location().trim_end_matches('/'),
            self.files
        )
    }

    fn accumulate_totals(&mut self, summary: &mut HashMap<String, String>) {
        for (total, added, removed) in TOTALS {
            let get = |k: &str| {
                summary
                    .get(k)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let value = self
                .totals
                .get(*total)
                .copied()
                .unwrap_or(0)
                .saturating_add(get(added))
                .saturating_sub(get(removed));
            self.totals.insert(total.to_string(), value);
            summary.insert(total.to_string(), value.to_string());
        }
    }
}

const TOTALS: &[(&str, &str, &str)] = &[
    ("total-records", "added-records", "deleted-records"),
    ("total-files-size", "added-files-size", "removed-files-size"),
    ("total-data-files", "added-data-files", "deleted-data-files"),
    (
        "total-delete-files",
        "added-delete-files",
        "removed-delete-files",
    ),
    (
        "total-position-deletes",
        "added-position-deletes",
        "removed-position-deletes",
    ),
    (
        "total-equality-deletes",
        "added-equality-deletes",
        "removed-equality-deletes",
    ),
];

/// The `total-*` counts of `summary`. They are readers' statistics, never
/// what a commit decides by (the ledger and the manifests are), so one
/// missing or unreadable is left out rather than failing the commit.
fn totals_of(summary: &Summary) -> HashMap<String, u64> {
    TOTALS
        .iter()
        .filter_map(|(k, _, _)| {
            let v = summary.additional_properties.get(*k)?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect()
}

// A failed `set_branch_snapshot` consumes the builder; the producer is spent.
fn finished() -> Error {
    Error::new(
        ErrorKind::Unexpected,
        "snapshot producer used after a failed add",
    )
}

/// Which live files a rewrite of carried manifests removes: those named in
/// `only`, with the deletion vectors of the data files named; with `None`,
/// every one.
struct Removal<'s> {
    only: Option<&'s HashSet<&'s str>>,
}

impl Removal<'_> {
    /// True for an entry `only` names itself.
    fn named(&self, e: &ManifestEntry) -> bool {
        self.only
            .is_none_or(|set| set.contains(&*file_key(e.data_file())))
    }

    /// True for an entry removed: named, or a vector of a named data file
    /// (a vector names the one data file it applies to: it goes with it).
    fn removes(&self, e: &ManifestEntry) -> bool {
        let follows = self.only.is_some_and(|set| {
            is_vector(e.data_file())
                && e.data_file()
                    .referenced_data_file()
                    .is_some_and(|target| set.contains(target.as_str()))
        });
        self.named(e) || follows
    }

    /// Copies `manifest`'s live entries into `writer`: removed ones as
    /// deleted (and out of the summary), the others as existing. Returns how
    /// many of the files named in `only` it removed.
    fn rewrite(
        &self,
        m: &ManifestFile,
        manifest: &Manifest,
        writer: &mut ManifestWriter,
        spec: &PartitionSpecRef,
        schema: &SchemaRef,
        collector: &mut SnapshotSummaryCollector,
    ) -> iceberg::Result<usize> {
        let mut found = 0;
        // Row ids handed out by inheritance are written out, or the new
        // manifest's own range would renumber the rows.
        let row_ids = lineage::first_row_ids(m, manifest);
        for (e, row_id) in manifest.entries().iter().zip(row_ids) {
            if !e.is_alive() {
                continue;
            }
            let seq = e.sequence_number().ok_or_else(|| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("manifest entry {} has no sequence number", e.file_path()),
                )
            })?;
            let file = match row_id {
                Some(id) if e.data_file().first_row_id().is_none() => {
                    lineage::with_first_row_id(e.data_file(), m.partition_spec_id, id)?
                }
                _ => e.data_file().clone(),
            };
            if self.removes(e) {
                found += usize::from(self.named(e));
                collector.remove_file(&file, schema.clone(), spec.clone());
                writer.add_delete_file(file, seq, e.file_sequence_number)?;
            } else {
                let added_by = e.snapshot_id().unwrap_or(m.added_snapshot_id);
                writer.add_existing_file(file, added_by, seq, e.file_sequence_number)?;
            }
        }
        Ok(found)
    }
}
