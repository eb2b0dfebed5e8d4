//! Builds the column tree from the Iceberg schema and its Arrow form side by side.

use arrow_schema::{DataType, FieldRef, Fields};
use iceberg::spec::{NestedField, NestedFieldRef, PrimitiveType, Type};

use super::bitmap::Bitmap;
use super::column::{Column, Kind, ListCol, MapCol, StructCol, VarBytes};
use super::error::ShredError;
use super::lookup::FieldLookup;
use super::temporal::DateCache;
use super::temporal::TsUnit;

fn unsupported(path: &str, reason: impl Into<String>) -> ShredError {
    ShredError::Unsupported {
        field: path.to_string(),
        reason: reason.into(),
    }
}

/// Where a column sits, in two spellings: `path` names it in schema errors (`m.value`), `shape`
/// is the position-free record path that unknown keys are reported under (`m{}`, `items[]`).
#[derive(Clone, Copy)]
pub(super) struct At<'p> {
    pub path: &'p str,
    pub shape: &'p str,
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The struct of `fields` matched with their Arrow `arrow` fields (same order, by construction
/// of `schema_to_arrow_schema`).
pub(super) fn struct_col(
    fields: &[NestedFieldRef],
    arrow: &Fields,
    at: At,
    case_insensitive: bool,
) -> Result<StructCol, ShredError> {
    let path = at.path;
    if fields.len() != arrow.len() {
        return Err(unsupported(path, "Arrow and Iceberg field counts differ"));
    }
    let children = fields
        .iter()
        .zip(arrow.iter())
        .map(|(nf, af)| {
            let path = join(path, &nf.name);
            let shape = join(at.shape, &nf.name);
            column(
                nf,
                af,
                At {
                    path: &path,
                    shape: &shape,
                },
                case_insensitive,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(StructCol {
        fields: arrow.clone(),
        lookup: FieldLookup::new(fields.iter().map(|f| f.name.as_str()), case_insensitive),
        children,
        shape: at.shape.into(),
    })
}

fn column(
    nf: &NestedField,
    af: &FieldRef,
    at: At,
    case_insensitive: bool,
) -> Result<Column, ShredError> {
    let At { path, shape } = at;
    if nf.name != *af.name() {
        return Err(unsupported(
            path,
            "Arrow field name differs from the Iceberg one",
        ));
    }
    let kind = match (nf.field_type.as_ref(), af.data_type()) {
        (Type::Primitive(p), dt) => primitive(p, dt, path)?,
        (Type::Struct(st), DataType::Struct(arrow)) => Kind::Struct(Box::new(struct_col(
            st.fields(),
            arrow,
            at,
            case_insensitive,
        )?)),
        (Type::List(lt), DataType::List(element)) => Kind::List(Box::new(ListCol {
            element: element.clone(),
            offsets: vec![0],
            child: column(
                &lt.element_field,
                element,
                At {
                    path: &format!("{path}[]"),
                    shape: &format!("{shape}[]"),
                },
                case_insensitive,
            )?,
        })),
        (Type::Map(mt), DataType::Map(entries, _)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(unsupported(path, "Arrow map entries are not a struct"));
            };
            let [key, value] = kv.iter().collect::<Vec<_>>()[..] else {
                return Err(unsupported(
                    path,
                    "Arrow map entries need exactly two fields",
                ));
            };
            Kind::Map(Box::new(MapCol {
                entries: entries.clone(),
                offsets: vec![0],
                keys: column(
                    &mt.key_field,
                    key,
                    At {
                        path: &format!("{path}.key"),
                        shape: &format!("{shape}{{key}}"),
                    },
                    case_insensitive,
                )?,
                values: column(
                    &mt.value_field,
                    value,
                    At {
                        path: &format!("{path}.value"),
                        shape: &format!("{shape}{{}}"),
                    },
                    case_insensitive,
                )?,
            }))
        }
        (t, dt) => {
            return Err(unsupported(
                path,
                format!("Iceberg type {t} does not match Arrow type {dt}"),
            ));
        }
    };
    Ok(Column::new(af.clone(), kind))
}

fn primitive(p: &PrimitiveType, dt: &DataType, path: &str) -> Result<Kind, ShredError> {
    Ok(match p {
        PrimitiveType::Boolean => Kind::Bool(Bitmap::default()),
        PrimitiveType::Int => Kind::Int(Vec::new()),
        PrimitiveType::Long => Kind::Long(Vec::new()),
        PrimitiveType::Float => Kind::Float(Vec::new()),
        PrimitiveType::Double => Kind::Double(Vec::new()),
        PrimitiveType::Decimal { precision, scale } => {
            let (Ok(precision), Ok(scale)) = (u8::try_from(*precision), i8::try_from(*scale))
            else {
                return Err(unsupported(path, "decimal precision or scale out of range"));
            };
            if !(1..=38).contains(&precision) || scale < 0 || scale as u8 > precision {
                return Err(unsupported(
                    path,
                    format!("decimal({precision},{scale}) is outside what Decimal128 holds"),
                ));
            }
            Kind::Decimal {
                precision,
                scale,
                values: Vec::new(),
            }
        }
        PrimitiveType::Date => Kind::Date(Vec::new()),
        PrimitiveType::Time => Kind::Time(Vec::new()),
        PrimitiveType::Timestamp | PrimitiveType::Timestamptz => Kind::Timestamp {
            unit: TsUnit::Micros,
            values: Vec::new(),
            dates: DateCache::default(),
        },
        PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs => Kind::Timestamp {
            unit: TsUnit::Nanos,
            values: Vec::new(),
            dates: DateCache::default(),
        },
        PrimitiveType::String => Kind::String(VarBytes::new()),
        PrimitiveType::Binary => Kind::Binary(VarBytes::new()),
        PrimitiveType::Uuid => Kind::Uuid(Vec::new()),
        PrimitiveType::Fixed(n) => match dt {
            DataType::FixedSizeBinary(w) if *w > 0 && *w as u64 == *n => Kind::Fixed {
                width: *w as usize,
                data: Vec::new(),
            },
            _ => {
                return Err(unsupported(
                    path,
                    format!("fixed[{n}] has no fixed-width Arrow form"),
                ));
            }
        },
    })
}
