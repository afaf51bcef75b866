//! The messages between a calling process and a link worker: `LINK` (a whole link: nvJitLink's
//! options, whether PTX is wanted, every input with its kind and name) and `LINKED` (the code
//! and info log, or nvJitLink's failure as the calling process would have had it). Framed and
//! sealed as every worker message is ([`super::wire`]).

use super::wire::{self, Fields, LINK, LINKED};
use crate::codec::{Malformed, Reader};
use crate::compile::Output;
use crate::component::Component;
use crate::error::Error;
use crate::kinds::InputKind;

/// The kinds of input, by their number in a message.
const KINDS: [InputKind; 7] = [
    InputKind::Cubin,
    InputKind::Ptx,
    InputKind::LtoIr,
    InputKind::Fatbin,
    InputKind::Object,
    InputKind::Library,
    InputKind::Any,
];

/// The nvJitLink calls a link makes, whose failures travel back as they are.
const NVJITLINK_CALLS: [&str; 12] = [
    "nvJitLinkCreate",
    "nvJitLinkAddData",
    "nvJitLinkComplete",
    "nvJitLinkGetLinkedCubinSize",
    "nvJitLinkGetLinkedCubin",
    "nvJitLinkGetLinkedPtxSize",
    "nvJitLinkGetLinkedPtx",
    "nvJitLinkGetErrorLogSize",
    "nvJitLinkGetErrorLog",
    "nvJitLinkGetInfoLogSize",
    "nvJitLinkGetInfoLog",
    "nvJitLinkDestroy",
];

/// One input of a link: its kind (checked), its name in the logs, its bytes.
pub(crate) type LinkInput<'a> = (InputKind, &'a str, &'a [u8]);

/// A link as a message.
pub(crate) fn encode_link(options: &[String], ptx: bool, inputs: &[LinkInput]) -> Vec<u8> {
    let mut writer = wire::message(LINK);
    writer.texts(options).bool(ptx);
    writer.list(inputs, |writer, (kind, name, bytes)| {
        let number = KINDS.iter().position(|known| known == kind).unwrap_or(6);
        writer.u8(number as u8).text(name).bytes(bytes);
    });
    writer.0
}

/// What a link worker links: nvJitLink's options, whether PTX is wanted, the inputs.
pub(crate) type LinkRequest = (Vec<String>, bool, Vec<(InputKind, String, Vec<u8>)>);

/// A link from a message.
pub(crate) fn decode_link(message: &[u8]) -> Result<LinkRequest, Malformed> {
    let mut reader = wire::tagged(message, LINK)?;
    let options = reader.list(Reader::text)?;
    let ptx = reader.bool()?;
    let inputs = reader.list(|reader| {
        let kind = *KINDS
            .get(usize::from(reader.u8()?))
            .ok_or(Malformed::Unknown("input kind"))?;
        Ok((kind, reader.text()?, reader.bytes()?.to_vec()))
    })?;
    reader.end()?;
    Ok((options, ptx, inputs))
}

/// A link's result: the output's kind, the code and the info log, or why it failed.
pub(crate) type LinkResult = Result<(Output, Vec<u8>, String), Error>;

/// A link's result as a message. A failure other than nvJitLink's travels as its text.
pub(crate) fn encode_linked(result: &LinkResult) -> Vec<u8> {
    let mut writer = wire::message(LINKED);
    match result {
        Ok((output, code, log)) => {
            writer.u8(0).output(*output).bytes(code).text(log);
        }
        Err(Error::Cuda(call))
            if call.api == Component::NvJitLink && NVJITLINK_CALLS.contains(&call.call) =>
        {
            wire::write_call(writer.u8(1), call);
        }
        Err(other) => {
            writer.u8(2).text(&other.to_string());
        }
    }
    writer.0
}

/// A link's result from a message: `Err(Ok(text))` for a failure that travels as text.
pub(crate) fn decode_linked(message: &[u8]) -> Result<Result<LinkResult, String>, Malformed> {
    let mut reader = wire::tagged(message, LINKED)?;
    let result = match reader.u8()? {
        0 => Ok(Ok((
            wire::read_output(&mut reader)?,
            reader.bytes()?.to_vec(),
            reader.text()?,
        ))),
        1 => Ok(Err(wire::read_call(
            &mut reader,
            Component::NvJitLink,
            &NVJITLINK_CALLS,
        )?)),
        2 => Err(reader.text()?),
        _ => return Err(Malformed::Unknown("link result")),
    };
    reader.end()?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CallError;

    #[test]
    fn a_link_round_trips_and_every_cut_is_refused() {
        let options = vec!["-arch=sm_90".to_owned(), "-lto".to_owned()];
        let inputs = [
            (InputKind::LtoIr, "a.ltoir", &b"one"[..]),
            (InputKind::Library, "libb.a", &b"two"[..]),
        ];
        let message = encode_link(&options, true, &inputs);
        let (decoded_options, ptx, decoded) = decode_link(&message).unwrap();
        assert_eq!((decoded_options, ptx), (options, true));
        let expected: Vec<_> = inputs
            .iter()
            .map(|&(kind, name, bytes)| (kind, name.to_owned(), bytes.to_vec()))
            .collect();
        assert_eq!(decoded, expected);
        for len in 0..message.len() {
            assert!(decode_link(&message[..len]).is_err(), "cut to {len}");
        }
        assert!(decode_linked(&message).is_err(), "a LINK is no LINKED");
    }

    #[test]
    fn results_round_trip() {
        let linked: LinkResult = Ok((Output::Cubin, vec![1, 2], "info".into()));
        let decoded = decode_linked(&encode_linked(&linked)).unwrap().unwrap();
        assert_eq!(decoded.unwrap(), (Output::Cubin, vec![1, 2], "info".into()));
        let failure = Error::Cuda(Box::new(CallError {
            api: Component::NvJitLink,
            call: "nvJitLinkComplete",
            code: 6,
            name: "NVJITLINK_ERROR_INTERNAL".into(),
            message: "internal error".into(),
            log: Some("Undefined reference".into()),
            hint: Some("add it".into()),
        }));
        let decoded = decode_linked(&encode_linked(&Err(failure.clone()))).unwrap();
        let Ok(Err(Error::Cuda(call))) = decoded else {
            panic!("{decoded:?}");
        };
        assert_eq!(Error::Cuda(call).to_string(), failure.to_string());
        let other = Error::NulByte {
            what: "input name",
            text: "a\0".into(),
        };
        let decoded = decode_linked(&encode_linked(&Err(other.clone()))).unwrap();
        assert_eq!(decoded.unwrap_err(), other.to_string());
    }
}
