//! What the writer's stages hand each other: a table's records grouped by
//! routing, its loaded context, the part of a batch a stage works on, and a
//! shredded part ready for its files. Kept apart from the stages so that
//! none of them imports another.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use iceberg::TableIdent;
use iceberg::spec::StructType;

use super::PipelineError;
use super::scope::Scope;
use crate::avro::Registered;
use crate::catalog::LoadedTable;
use crate::change;
use crate::config::{ResolvedTable, UnknownFields as ConfigUnknown};
use crate::dlq::Rejected;
use crate::evolve::InferOptions;
use crate::ident::display;
use crate::shred::{ShredError, ShredOptions, UnknownFields};
use crate::source::{Pos, Position, SourceBatch};
use crate::write::rows::RowId;
use crate::write::{TableWriter, WriteError};

/// A loaded table with its file writer and settings.
pub(super) struct TableContext {
    pub loaded: LoadedTable,
    pub writer: TableWriter,
    pub settings: ResolvedTable,
}

impl TableContext {
    /// True while `metadata` is still the table this context writes for,
    /// with the schema and partition spec its writer uses.
    pub fn describes(&self, metadata: &iceberg::spec::TableMetadata) -> bool {
        metadata.uuid() == self.loaded.metadata.uuid()
            && metadata.current_schema_id() == self.writer.schema_id()
            && metadata.default_partition_spec_id() == self.writer.spec_id()
    }
}

/// One table's part of a batch as every stage of the writer step sees it,
/// built once when the table is loaded: what names it in errors and dead
/// letters, what its records declare, and the table itself.
pub(super) struct Part<'p> {
    pub ident: &'p TableIdent,
    /// The table's name as messages and dead letters show it.
    pub table: String,
    pub batch_id: &'p str,
    pub batch: &'p SourceBatch,
    /// The types a schema registry declares for the records.
    pub declared: Option<Arc<StructType>>,
    /// The registry schemas of its records that stayed binary Avro.
    pub avro: Option<Arc<Registered>>,
    /// The table as the part found it; a stage that evolves the schema
    /// loads it again.
    pub ctx: Arc<TableContext>,
    /// The table's identifier fields; empty for an append-only table.
    pub key_names: Vec<String>,
}

impl<'p> Part<'p> {
    /// The part of `batch` (as sub-batch `batch_id`) bound for table
    /// `ident`, loaded as `ctx`, with `group`'s declared types and schemas.
    pub(super) fn new(
        ident: &'p TableIdent,
        batch_id: &'p str,
        batch: &'p SourceBatch,
        group: &Group<'_>,
        ctx: Arc<TableContext>,
    ) -> Self {
        let schema = ctx.loaded.metadata.current_schema();
        let key_names = schema
            .identifier_field_ids()
            .filter_map(|id| schema.field_by_id(id).map(|f| f.name.clone()))
            .collect();
        Self {
            ident,
            table: display(ident),
            batch_id,
            batch,
            declared: group.declared.clone(),
            avro: group.avro.clone(),
            ctx,
            key_names,
        }
    }

    /// The dead letter of the record at `pos`, refused for `reason` (at
    /// `field`, empty when the whole record is at fault).
    pub(super) fn reject(
        &self,
        pos: Pos<'_>,
        field: &str,
        reason: &str,
        record: &[u8],
    ) -> Rejected {
        Scope::new(&self.table, self.batch_id, self.batch).reject(pos, field, reason, record)
    }

    /// A shredder failure of this part.
    pub(super) fn shred_err(&self, source: ShredError) -> PipelineError {
        PipelineError::Shred {
            table: self.table.clone(),
            batch_id: self.batch_id.to_string(),
            source: Box::new(source),
        }
    }

    /// The schema this part's new fields need is one Iceberg refuses.
    pub(super) fn evolve_err(&self, source: iceberg::Error) -> PipelineError {
        PipelineError::Evolve {
            table: self.table.clone(),
            batch_id: self.batch_id.to_string(),
            source: Box::new(source),
        }
    }

    /// A data or delete file of this part that could not be written.
    pub(super) fn write_err(&self, source: WriteError) -> PipelineError {
        PipelineError::Write {
            batch_id: self.batch_id.to_string(),
            source,
        }
    }
}

/// A group of records bound for one table.
pub(super) struct Group<'a> {
    pub records: Vec<(Pos<'a>, Cow<'a, [u8]>)>,
    /// How DynamoDB stream records among them become their items on an
    /// append-only table; `None` when the source sends none.
    pub items: Option<change::ItemRow>,
    /// The types a schema registry declares for the records (Avro), which
    /// a new column takes instead of one inferred from a value.
    pub declared: Option<Arc<StructType>>,
    /// The registry schemas of records that stayed binary Avro, which read
    /// them (as JSON where a stage needs JSON).
    pub avro: Option<Arc<Registered>>,
    /// Records of the batch that could not be opened (an envelope, a
    /// codec or a registry refused them), dead-lettered with the table's
    /// own rejections, in one file per batch id.
    pub rejected: Vec<Rejected>,
}

/// What a table created on first write infers its schema from: records
/// of a group or of a stage, borrowed, with how to read them.
pub(super) struct Sample<'s, 'r> {
    pub records: &'s [(Pos<'r>, Cow<'r, [u8]>)],
    pub items: Option<change::ItemRow>,
    pub declared: Option<&'s Arc<StructType>>,
    pub avro: Option<&'s Registered>,
}

impl<'a> Group<'a> {
    /// The group's records as a [`Sample`].
    pub(super) fn sample(&self) -> Sample<'_, 'a> {
        Sample {
            records: &self.records,
            items: self.items,
            declared: self.declared.as_ref(),
            avro: self.avro.as_deref(),
        }
    }

    pub(super) fn new(
        records: Vec<(Pos<'a>, Cow<'a, [u8]>)>,
        declared: Option<Arc<StructType>>,
    ) -> Self {
        Self {
            records,
            items: None,
            declared,
            avro: None,
            rejected: Vec::new(),
        }
    }
}

/// A batch's records by table.
pub(super) struct Groups<'a> {
    /// Each table's group, by the table's name.
    pub tables: BTreeMap<String, (TableIdent, Group<'a>)>,
    /// Records no route places, for the `_unrouted` dead letters.
    pub unrouted: Vec<Rejected>,
}

impl Groups<'_> {
    /// The group of table `t`, made by `new` on its first record.
    pub(super) fn of<'g, 'a>(
        tables: &'g mut BTreeMap<String, (TableIdent, Group<'a>)>,
        names: &mut Names,
        t: &TableIdent,
        new: impl FnOnce() -> Group<'a>,
    ) -> &'g mut Group<'a> {
        let name = names.of(t);
        // Looked up before inserting: an entry would need the name owned,
        // an allocation for each of a batch's records.
        if !tables.contains_key(name) {
            tables.insert(name.to_owned(), (t.clone(), new()));
        }
        match tables.get_mut(name) {
            Some((_, group)) => group,
            None => unreachable!("inserted above"),
        }
    }
}

/// Table names as group keys for routed records, formatted once per run of
/// records bound for one table rather than once per record: at a million
/// records a second, naming each was a tenth of the write path. (A batch
/// with one table never names it per record: `group.rs`, `one_table`.)
#[derive(Default)]
pub(super) struct Names {
    last: Option<(TableIdent, String)>,
}

impl Names {
    fn of(&mut self, t: &TableIdent) -> &str {
        if self.last.as_ref().is_none_or(|(last, _)| last != t) {
            self.last = Some((t.clone(), display(t)));
        }
        self.last.as_ref().map_or("", |(_, name)| name)
    }
}

/// A table's part of a batch, shredded and ready for its files.
pub(super) struct Output {
    pub ctx: Arc<TableContext>,
    pub data: RecordBatch,
    /// The record each row of `data` came from, when the batch names them.
    pub row_ids: Vec<Option<RowId>>,
    pub keys: Option<KeyedFiles>,
    /// Records of the part dead-lettered.
    pub rejected: u64,
}

/// What a keyed batch deletes and records in its key file.
pub(super) struct KeyedFiles {
    /// Every touched key as a JSON object of its key columns (the equality deletes).
    pub keys: Vec<Vec<u8>>,
    /// Every touched key's digest, source and the position of its change.
    pub file: Vec<(u128, u16, Option<Position>)>,
    pub truncate: bool,
    /// Where in its source the batch's last TRUNCATE is, when it has one.
    pub truncate_at: Option<Position>,
    /// The first and last of its changes in the table's change order, when
    /// the table has one.
    pub order: Option<(Position, Position)>,
    /// Rows read into columns among the touched keys: their key columns are
    /// equality deletes too, beside `keys`.
    pub reads: Option<RecordBatch>,
}

impl KeyedFiles {
    /// True when the batch touches no key and truncates nothing.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.file.is_empty() && !self.truncate && self.reads.is_none()
    }
}

/// How the table's settings shred its records.
pub(super) fn shred_options(t: &ResolvedTable) -> ShredOptions {
    ShredOptions {
        case_insensitive: t.case_insensitive,
        epoch_unit: t.epoch_unit,
        unknown_fields: match (t.evolution, t.unknown_fields) {
            (true, _) => UnknownFields::Collect,
            (false, ConfigUnknown::Ignore) => UnknownFields::Ignore,
            (false, ConfigUnknown::Reject) => UnknownFields::Reject,
        },
        coerce: crate::config::coercions(&t.coerce),
    }
}

/// How the table's settings infer a column from a value.
pub fn infer_options(t: &ResolvedTable) -> InferOptions {
    InferOptions {
        decimal_scale: t.infer_decimal_scale.map(u32::from),
        timestamps: t.infer_timestamps,
        case_insensitive: t.case_insensitive,
        widen: t.widen_types,
        relax_required: t.relax_required,
        declared: None,
    }
}
