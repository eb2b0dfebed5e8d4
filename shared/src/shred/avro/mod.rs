//! Registry Avro straight into the columns, with no JSON between: a
//! writer's plan is bound to this shredder's columns once ([`bind`]), then
//! each datum is walked into them ([`put`]). A record the walk does not
//! take whole is rolled back and shredded from its JSON text instead, so
//! table content, errors and unknown keys are always the JSON path's.

mod bind;
mod put;

use bind::Bound;
use put::{Cx, Miss};

use super::Shredder;
use super::error::{RecordError, RecordErrorKind};
use crate::avro::Decoder;
use crate::avro::read::Reader;

/// What the direct path keeps across records.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Plans bound to the columns, by plan id; `None` where the JSON path
    /// takes every record of the schema.
    bound: Vec<(u64, Option<Bound>)>,
    /// A value's JSON text, for steps that hand it to the JSON reader.
    text: Vec<u8>,
    /// Map entries being sorted.
    entries: Vec<(usize, usize, usize)>,
    /// Records the direct path took whole, for tests that it is taken.
    #[cfg(test)]
    pub direct: usize,
}

impl Shredder {
    /// Appends one registry Avro datum written with `decoder`'s schema,
    /// read from its binary encoding straight into the columns. A record
    /// the direct path does not take whole is shredded from its JSON text
    /// ([`Decoder::json`]) instead; the outcome is always that path's.
    pub fn push_avro(&mut self, decoder: &Decoder, datum: &[u8]) -> Result<(), RecordError> {
        if let Some(plan) = decoder.plan() {
            let slot = match self.avro.bound.iter().position(|(id, _)| *id == plan.id()) {
                Some(i) => i,
                None => {
                    let bound = bind::bind(plan, &self.root, self.options.unknown_fields);
                    self.avro.bound.push((plan.id(), bound));
                    self.avro.bound.len() - 1
                }
            };
            let State {
                bound,
                text,
                entries,
                ..
            } = &mut self.avro;
            if let Some((_, Some(bound))) = bound.get(slot) {
                entries.clear();
                let mut cx = Cx {
                    plan,
                    scratch: &mut self.scratch,
                    text,
                    entries,
                    epoch: self.options.epoch_unit,
                    case_insensitive: self.options.case_insensitive,
                };
                let mut r = Reader::new(datum);
                let done = put::record(&bound.root, &mut self.root, &mut r, &mut cx)
                    .and_then(|()| if r.at_end() { Ok(()) } else { Err(Miss) });
                if done.is_ok() {
                    #[cfg(test)]
                    {
                        self.avro.direct += 1;
                    }
                    self.scratch.collector.accept(self.rows);
                    self.rows += 1;
                    return Ok(());
                }
                self.root.truncate(self.rows);
                self.scratch.collector.discard();
            }
        }
        match decoder.json(datum) {
            Ok(json) => self.push(&json),
            Err(e) => {
                self.scratch.collector.reject();
                Err(RecordError {
                    field: e.field,
                    reason: e.reason,
                    kind: RecordErrorKind::Syntax,
                })
            }
        }
    }
}
