pub mod account;
pub mod documents;
pub mod ops;
pub mod settings;
