pub mod account;
pub mod agents;
pub mod documents;
pub mod ops;
pub mod settings;
