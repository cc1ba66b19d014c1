//! A store that lets another writer in between a write's reads and its
//! commit, on purpose: the contract suite's concurrent edit, made
//! deterministic. [`Interleaved::before_next_commit`] arms one write; the
//! next [`EntityStore::commit`] runs it first, then its own. Every other
//! call goes straight to the store underneath.

use super::{Commit, CommitError, ContentRef, EntityRow, EntityStore, ProjectRow};
use crate::entities::model::{Edge, EntityKind};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::StoreError;
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};

type Hook = BoxFuture<'static, ()>;

#[derive(Clone)]
pub struct Interleaved<S> {
    inner: S,
    hook: Arc<Mutex<Option<Hook>>>,
}

impl<S: EntityStore + Clone + 'static> Interleaved<S> {
    pub fn new(inner: S) -> Self {
        Interleaved { inner, hook: Arc::new(Mutex::new(None)) }
    }

    /// The store underneath, for the other writer.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Runs `write` just before the next commit reaches the store.
    pub fn before_next_commit(&self, write: impl std::future::Future<Output = ()> + Send + 'static) {
        *self.hook.lock().expect("hook lock") = Some(Box::pin(write));
    }
}

#[async_trait::async_trait]
impl<S: EntityStore + Clone + 'static> EntityStore for Interleaved<S> {
    async fn get_project(&self, user: &UserId, project: &ProjectId) -> Result<Option<ProjectRow>, StoreError> {
        self.inner.get_project(user, project).await
    }
    async fn list_projects(
        &self,
        user: &UserId,
        limit: usize,
        after: Option<&ProjectRow>,
    ) -> Result<(Vec<ProjectRow>, bool), StoreError> {
        self.inner.list_projects(user, limit, after).await
    }
    async fn all_projects(&self, user: &UserId) -> Result<Vec<ProjectRow>, StoreError> {
        self.inner.all_projects(user).await
    }
    async fn get_entity(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
    ) -> Result<Option<EntityRow>, StoreError> {
        self.inner.get_entity(user, project, kind, id).await
    }
    async fn list_entities(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        limit: usize,
        after: Option<&EntityId>,
    ) -> Result<(Vec<EntityRow>, bool), StoreError> {
        self.inner.list_entities(user, project, kind, limit, after).await
    }
    async fn edges_of(&self, user: &UserId, project: &ProjectId, id: &EntityId) -> Result<Vec<Edge>, StoreError> {
        self.inner.edges_of(user, project, id).await
    }
    async fn all_edges(&self, user: &UserId, project: &ProjectId) -> Result<Vec<Edge>, StoreError> {
        self.inner.all_edges(user, project).await
    }
    async fn edge_exists(&self, user: &UserId, project: &ProjectId, e: &Edge) -> Result<bool, StoreError> {
        self.inner.edge_exists(user, project, e).await
    }
    async fn write_content(
        &self,
        user: &UserId,
        project: &ProjectId,
        doc: &EntityId,
        content: &str,
    ) -> Result<Option<ContentRef>, StoreError> {
        self.inner.write_content(user, project, doc, content).await
    }
    async fn read_content(
        &self,
        user: &UserId,
        project: &ProjectId,
        doc: &EntityId,
        c: &ContentRef,
    ) -> Result<Option<String>, StoreError> {
        self.inner.read_content(user, project, doc, c).await
    }
    async fn delete_content(&self, user: &UserId, project: &ProjectId, doc: &EntityId, c: &ContentRef) {
        self.inner.delete_content(user, project, doc, c).await
    }
    async fn project_contents(
        &self,
        user: &UserId,
        project: &ProjectId,
    ) -> Result<Vec<(EntityRow, Option<String>)>, StoreError> {
        self.inner.project_contents(user, project).await
    }
    async fn delete_project_items(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
        self.inner.delete_project_items(user, project).await
    }
    async fn delete_project_meta(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
        self.inner.delete_project_meta(user, project).await
    }
    async fn commit(&self, user: &UserId, c: &Commit) -> Result<(), CommitError> {
        let hook = self.hook.lock().expect("hook lock").take();
        if let Some(write) = hook {
            write.await;
        }
        self.inner.commit(user, c).await
    }
}
