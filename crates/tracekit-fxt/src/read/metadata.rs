//! Decoding metadata records (type 0: the magic number, provider info, provider
//! section, provider event, other trace info) and initialization records (type 1:
//! the tick rate), the mirror of [`crate::write::metadata`], whose docs give the
//! header bits. The whole format: `docs/fxt-format.md` at the repository root,
//! §4 "Metadata records" and §5 "Initialization record".
//!
//! What the decoder does with what it cannot use:
//!
//! * a trace-info record of info type 0 whose word is not exactly the magic number
//!   is [`Problem::BadMagic`]; trace-info records of other info types are kept
//!   as they are ([`Record::TraceInfo`]);
//! * a metadata subtype other than 1–4 is [`Problem::UnknownMetadataType`] and the
//!   record is skipped;
//! * an initialization record with 0 ticks per second is
//!   [`Problem::ZeroTicksPerSecond`]; one with two or more words after the tick rate
//!   is Jane Street's 4-word form, whose next two words are a
//!   [`ClockAnchor`]; a single extra word is ignored.

use super::Problem;
use super::cursor::Cursor;
use super::parse::Notes;
use super::records::{RawRecord, Record};
use crate::format::{ClockAnchor, Initialization, MAGIC, ProviderEvent, bits, metadata_type};

pub(super) fn metadata<'a>(
    h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let subtype = bits(h, 16, 19);
    let id = bits(h, 20, 51) as u32;
    Some(match subtype {
        metadata_type::PROVIDER_INFO => Record::ProviderInfo {
            id,
            name: c.stream(bits(h, 52, 59) as usize)?,
        },
        metadata_type::PROVIDER_SECTION => Record::ProviderSection { id },
        metadata_type::PROVIDER_EVENT => Record::ProviderEvent {
            id,
            event: ProviderEvent(bits(h, 52, 55) as u8),
        },
        metadata_type::TRACE_INFO => {
            let info_type = bits(h, 20, 23) as u8;
            if info_type == 0 {
                if h != MAGIC {
                    return n.fail(Problem::BadMagic { word: h });
                }
                Record::Magic
            } else {
                Record::TraceInfo { info_type, word: h }
            }
        }
        other => {
            n.note(Problem::UnknownMetadataType(other as u8));
            return None;
        }
    })
}

pub(super) fn initialization<'a>(
    _h: u64,
    c: &mut Cursor<'a>,
    n: &mut Notes<impl FnMut(Problem)>,
) -> Option<RawRecord<'a>> {
    let ticks_per_second = c.word()?;
    if ticks_per_second == 0 {
        return n.fail(Problem::ZeroTicksPerSecond);
    }
    // Jane Street's extension: base ticks and base time follow when the record is
    // long enough; shorter extra content is ignored as trailing words.
    let base = if c.remaining() >= 16 {
        Some(ClockAnchor {
            ticks: c.word()?,
            unix_ns: c.word()?,
        })
    } else {
        None
    };
    Some(Record::Initialization(Initialization {
        ticks_per_second,
        base,
    }))
}
