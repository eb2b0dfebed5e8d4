//! Commit requests the way a writer makes them, for the catalog tests that
//! drive the commit engine directly (REST and Glue).

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use floe_core::catalog::Catalog;
use floe_core::iceberg::TableIdent;
use floe_core::request::{CommitRequest, VERSION};
use floe_core::source::{Positions, SourceSpan, batch_id};
use floe_core::write::TableWriter;

/// Writes `rows` as Parquet to the table's location and returns the request.
pub async fn write_request(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    rows: &[(i64, &str)],
) -> CommitRequest {
    let loaded = catalog.load_table(ident).await.unwrap();
    let writer = TableWriter::new(ident, &loaded.metadata, catalog.file_io().clone()).unwrap();
    let schema = Arc::new(
        floe_core::iceberg::arrow::schema_to_arrow_schema(loaded.metadata.current_schema())
            .unwrap(),
    );
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
    let names: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1)));
    let batch = RecordBatch::try_new(schema, vec![ids, names]).unwrap();
    let spans = vec![SourceSpan {
        source: "kafka:events/0".into(),
        positions: Positions::Range {
            first: (rows[0].0 as u64).into(),
            last: (rows[rows.len() - 1].0 as u64).into(),
        },
        stream: true,
    }];
    let id = batch_id(&spans, None);
    let files = writer.write(&batch, &id).await.unwrap();
    CommitRequest {
        version: VERSION,
        table_uuid: None,
        table: ident.clone(),
        batch_id: id.clone(),
        sources: spans,
        schema_id: writer.schema_id(),
        spec_id: writer.spec_id(),
        data_files: CommitRequest::encode_files(
            &loaded.metadata,
            writer.spec_id(),
            files,
            (ident, &id),
        )
        .unwrap(),
        delete_files: vec![],
        keyed: false,
        truncate: false,
        truncate_at: None,
        state: Default::default(),
        record_count: rows.len() as u64,
        rejected_count: 0,
        created_at_ms: 0,
        oldest_record_ms: None,
        key_file: None,
        order: Vec::new(),
    }
}
