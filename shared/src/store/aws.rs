//! The AWS SDK's configuration, one way for every client the product makes
//! (DynamoDB, SQS; the functions, the CLI, the tests): the SDK's defaults
//! from the environment, over one HTTPS client on rustls with ring.
//!
//! Why not the SDK's own `default-https-client`: it is rustls on aws-lc-rs,
//! whose C build was a tenth of a cold build's CPU (issue 31: a fresh clone
//! compiles before its first answer), while ring is built anyway for
//! reqwest. An SDK client built without [`http_client`] has no HTTP client
//! at all and fails every request, so every builder takes it from here.

use aws_config::{BehaviorVersion, ConfigLoader, SdkConfig};
use aws_sdk_dynamodb::config::SharedHttpClient;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use aws_smithy_http_client::Builder;
use std::sync::OnceLock;

/// The HTTPS client every SDK client uses (one per process: its connection
/// pool is shared by the clients made from it).
pub fn http_client() -> SharedHttpClient {
    static CLIENT: OnceLock<SharedHttpClient> = OnceLock::new();
    CLIENT.get_or_init(|| Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https()).clone()
}

/// `aws_config::defaults` (the latest behaviour version) over [`http_client`].
pub fn loader() -> ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest()).http_client(http_client())
}

/// The configuration from the environment (region, credentials, endpoints),
/// as `aws_config::load_from_env` reads it.
pub async fn load_from_env() -> SdkConfig {
    loader().load().await
}
