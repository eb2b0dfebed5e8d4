//! Nothing but the integration tests in tests/.
