//! One client connection: read size-prefixed frames, decode, handle, write responses in
//! request order. Bad input is a Kafka error where one can be encoded, otherwise the
//! connection closes with one log line; the broker keeps serving everyone else.

use crate::protocol::decode_request;
use crate::server::handlers::{error_response, handle};
use crate::server::shard::Shard;
use bytes::Bytes;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use std::rc::Rc;

pub async fn serve(shard: Rc<Shard>, mut stream: TcpStream) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let _ = stream.set_nodelay(true);
    let max = shard.config.max_request_bytes;
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return; // closed by the client
        }
        let n = i32::from_be_bytes(len);
        if n < 8 || n as usize > max {
            tracing::warn!(peer, size = n, max, "request size out of bounds; closing the connection");
            return;
        }
        let mut buf = vec![0u8; n as usize];
        if stream.read_exact(&mut buf).await.is_err() {
            return;
        }
        let response = match decode_request(Bytes::from(buf)) {
            Ok((header, request)) => match handle(&shard, &header, request).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(peer, api = header.api_key, version = header.api_version, error = %e, "cannot encode response; closing");
                    return;
                }
            },
            Err(failure) => {
                let answer = failure.header.as_ref().and_then(|h| error_response(h, &failure.error));
                if answer.is_none() {
                    tracing::warn!(peer, error = %failure.error, api = failure.header.as_ref().map(|h| h.api_key), "undecodable request; closing");
                    return;
                }
                answer
            }
        };
        if let Some(bytes) = response {
            if stream.write_all(&bytes).await.is_err() {
                return;
            }
        }
    }
}
