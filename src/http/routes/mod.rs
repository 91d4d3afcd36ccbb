pub mod account;
pub mod agents;
pub mod chat;
pub mod documents;
pub mod ops;
pub mod settings;
