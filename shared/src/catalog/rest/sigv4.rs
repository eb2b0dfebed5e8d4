//! AWS SigV4 signing of REST catalog calls, for Glue's Iceberg REST endpoint
//! (service `glue`) and S3 Tables (service `s3tables`). Uses `aws-sigv4`, which
//! the AWS SDK already compiles, with the credentials of floe's AWS clients.

use std::time::SystemTime;

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use reqwest::header::{HeaderName, HeaderValue};

use super::RestError;
use crate::error::BoxError;

/// Which AWS service and region to sign for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigV4 {
    /// The signing name: `glue` or `s3tables`.
    pub service: String,
    /// The region, e.g. `us-east-1`.
    pub region: String,
}

/// Signs requests with credentials from the AWS SDK's provider chain.
#[derive(Debug, Clone)]
pub struct Signer {
    sigv4: SigV4,
    credentials: SharedCredentialsProvider,
}

impl Signer {
    pub fn new(sigv4: SigV4, credentials: SharedCredentialsProvider) -> Self {
        Self { sigv4, credentials }
    }

    /// Adds the SigV4 headers (`authorization`, `x-amz-date`, `x-amz-content-sha256`,
    /// `x-amz-security-token`) to `request`, whose body is `body`.
    pub async fn sign(&self, request: &mut reqwest::Request, body: &[u8]) -> Result<(), RestError> {
        let url = request.url().to_string();
        let err = |context, source| RestError::Sign {
            url: url.clone(),
            context,
            source,
        };
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| err("no AWS credentials", e.into()))?;
        let identity = Identity::from(credentials);
        self.sign_with(request, body, &identity, SystemTime::now())
            .map_err(|e| err("signing", e))
    }

    fn sign_with(
        &self,
        request: &mut reqwest::Request,
        body: &[u8],
        identity: &Identity,
        time: SystemTime,
    ) -> Result<(), BoxError> {
        let mut settings = SigningSettings::default();
        // Glue's and S3 Tables' endpoints check the payload hash header, as
        // Java's RESTSigV4Signer sends it.
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = v4::SigningParams::builder()
            .identity(identity)
            .region(&self.sigv4.region)
            .name(&self.sigv4.service)
            .time(time)
            .settings(settings)
            .build()?
            .into();
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let url = request.url().to_string();
        let signable = SignableRequest::new(
            request.method().as_str(),
            url.as_str(),
            headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            SignableBody::Bytes(body),
        )?;
        let (instructions, _signature) = sign(signable, &params)?.into_parts();
        let (new_headers, _query) = instructions.into_parts();
        for header in new_headers {
            let name = HeaderName::from_static(header.name());
            let mut value = HeaderValue::from_str(header.value())?;
            value.set_sensitive(header.sensitive());
            request.headers_mut().insert(name, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use aws_credential_types::Credentials;

    use super::*;

    #[test]
    fn signs_with_the_service_region_and_payload_hash() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", Some("session".into()), None, "t");
        let signer = Signer::new(
            SigV4 {
                service: "glue".into(),
                region: "eu-west-1".into(),
            },
            SharedCredentialsProvider::new(creds.clone()),
        );
        let url = "https://glue.eu-west-1.amazonaws.com/iceberg/v1/config"
            .parse()
            .expect("url");
        let mut request = reqwest::Request::new(reqwest::Method::POST, url);
        // 2024-01-01T00:00:00Z
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_704_067_200);
        signer
            .sign_with(&mut request, b"{}", &Identity::from(creds), time)
            .expect("signs");
        let h = request.headers();
        let auth = h["authorization"].to_str().expect("ascii");
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/eu-west-1/glue/aws4_request"
            ),
            "{auth}"
        );
        assert_eq!(h["x-amz-date"], "20240101T000000Z");
        assert_eq!(h["x-amz-security-token"], "session");
        // sha256("{}")
        assert_eq!(
            h["x-amz-content-sha256"],
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
