//! floe's HTTP ingestion function (API Gateway HTTP API or a function URL):
//! the Lambda side of [`floe_core::http`], which `floe serve` runs too. This
//! crate only turns a `lambda_http` request into a plain `http::Request`
//! (marking callers AWS authenticated with [`IamCaller`]) and the answer back.

use bytes::Bytes;
use floe_core::deploy::Deployment;
pub use floe_core::http::HttpError;
use floe_core::http::{HttpIngest, IamCaller};
use lambda_http::{Body, Request, RequestExt, Response};

/// The HTTP function's state, kept across invocations of one instance.
pub struct HttpFunction {
    api: HttpIngest,
}

impl HttpFunction {
    /// The function over a deployment. Without `http.token` only requests
    /// AWS authenticated (Function URL `AWS_IAM`) get in.
    pub fn new(deployment: &Deployment) -> Result<Self, HttpError> {
        Ok(Self {
            api: HttpIngest::new(deployment)?,
        })
    }

    /// Answers one request; every failure is an HTTP answer, never an invocation error.
    pub async fn handle(&self, req: Request) -> Response<Body> {
        // Only AWS fills the authorizer's IAM part (Function URL with AWS_IAM).
        let iam = req
            .request_context_ref()
            .and_then(|c| c.authorizer())
            .is_some_and(|a| a.iam.is_some());
        let (parts, body) = req.into_parts();
        let body = Bytes::copy_from_slice(body.as_ref());
        let mut req = http::Request::from_parts(parts, body);
        // Whatever the client sent, only this adapter says who AWS checked.
        req.extensions_mut().remove::<IamCaller>();
        if iam {
            req.extensions_mut().insert(IamCaller);
        }
        let (parts, body) = self.api.handle(req).await.into_parts();
        // The API answers JSON, which is text.
        Response::from_parts(
            parts,
            Body::Text(String::from_utf8_lossy(&body).into_owned()),
        )
    }
}
