//! `GET /v1/models` and `GET /v1/models/{id}`: the union of configured routes and models, in
//! the dialect the client speaks (Anthropic when it sends `anthropic-version`).

use super::exchange::Request;
use super::respond::finish_error;
use super::respond::respond_json;
use crate::dialect::Dialect;
use bytes::Bytes;
use monoio::net::tcp::TcpOwnedWriteHalf;

/// `GET /v1/models`: every name a client may put in `model`.
pub(super) async fn models(ctx: &mut Request<'_>, wr: &mut TcpOwnedWriteHalf) -> bool {
    let routes = &ctx.generation.routes;
    let list = routes.model_list();
    let anthropic = ctx.head.get("anthropic-version").is_some();
    if let Some(id) = crate::dialect::model_in_path(ctx.head.path()) {
        // One model (the SDKs' `models.retrieve`), in the shape its dialect expects.
        let Some(&(id, owner)) = list.iter().find(|(m, _)| *m == id) else {
            let err = super::answer::of(ctx, &super::stop::Stop::ModelNotFound(id.to_string()));
            if anthropic {
                ctx.dialect = Dialect::Anthropic;
            }
            return finish_error(ctx, wr, &err, true).await;
        };
        let body = if anthropic {
            serde_json::json!({"type": "model", "id": id, "display_name": id, "created_at": "1970-01-01T00:00:00Z"})
        } else {
            serde_json::json!({"id": id, "object": "model", "created": 0, "owned_by": owner})
        };
        let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
        ctx.record.status = 200;
        ctx.record.outcome = crate::audit::Outcome::Ok;
        ctx.record.bytes_out = body.len() as u64;
        return respond_json(wr, 200, body, &ctx.record.request_id, ctx.keep_alive).await;
    }
    let body = if anthropic {
        let data: Vec<_> = list
            .iter()
            .map(|(id, _)| serde_json::json!({"type": "model", "id": id, "display_name": id, "created_at": "1970-01-01T00:00:00Z"}))
            .collect();
        serde_json::json!({"data": data, "has_more": false, "first_id": list.first().map(|x| x.0), "last_id": list.last().map(|x| x.0)})
    } else {
        let data: Vec<_> =
            list.iter().map(|(id, owner)| serde_json::json!({"id": id, "object": "model", "created": 0, "owned_by": owner})).collect();
        serde_json::json!({"object": "list", "data": data})
    };
    let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
    ctx.record.status = 200;
    ctx.record.outcome = crate::audit::Outcome::Ok;
    ctx.record.bytes_out = body.len() as u64;
    respond_json(wr, 200, body, &ctx.record.request_id, ctx.keep_alive).await
}
