// The page's entry point (loaded by index.html): wires the forms to their work and keeps the cluster view refreshed.
//
// The page: search every domain, see the cluster, add and delete records;
// register cross-archive requests, review those of other archives, print
// and check certificates. It is served by one domain but talks to all of
// them. Where things are:
//
//   dom.js      building and showing elements; the busy button
//   api.js      requests to a domain's API, with the API token
//   cluster.js  the state of the domains: refreshing and drawing it
//   budget.js   which domains' filters fit the page's budget (pure)
//   search.js   a search, answered by the filters here or by a server
//   person.js   a search by key (an identity number) in every domain
//   forms.js    adding and deleting records
//   requests.js the clerk's request form and list of requests
//   reviews.js  the reviewer's queue
//   certificate.js  a certificate to print; checking a certificate by its
//               code or, in the browser, by its QR code
//   requests-model.js  the requests' labels and the certificate (pure)
//   seal.js     SM3, SM2, CBOR, COSE: a certificate's seals checked (pure)
//
// Imports go one way only: app → forms → person → search → cluster →
// budget → api → dom, and app → requests → certificate → cluster, app →
// reviews → cluster (and each may import those further along, never
// those before; util.js, requests-model.js, seal.js and xarchive-filter.js,
// pure, by any).

import { $, busy } from './dom.js';
import { startTokenForm } from './api.js';
import { refreshAll, renderCluster } from './cluster.js';
import { search } from './search.js';
import { addRecord, findForDelete } from './forms.js';
import { loadKeyTypes, searchPerson } from './person.js';
import { loadRequests, submitRequest } from './requests.js';
import { loadReviews } from './reviews.js';
import { canScan, checkCode, scanCamera, scanImage, verifyPayload } from './certificate.js';

/** How often the cluster, the stats and the filters are refreshed. */
const REFRESH_MS = 3000;

/** How often the reviewer's queue is read again. */
const REVIEWS_MS = 5000;

function start() {
  startTokenForm(() => {
    refreshAll();
    loadRequests();
    loadReviews();
  });
  const searchForm = $('search-form');
  searchForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('search-button'), () => search($('search-id').value))();
  });
  const personForm = $('person-form');
  personForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('person-button'), searchPerson)();
  });
  loadKeyTypes();
  const addForm = $('add-form');
  addForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('add-button'), () => addRecord(addForm))();
  });
  const deleteForm = $('delete-form');
  deleteForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('delete-button'), () => findForDelete($('delete-id').value))();
  });

  const requestForm = $('request-form');
  requestForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('request-button'), () => submitRequest(requestForm))();
  });
  $('requests-refresh').addEventListener('click', () => loadRequests({ quiet: false }));
  $('reviews-refresh').addEventListener('click', () => loadReviews({ quiet: false }));
  const checkForm = $('check-form');
  checkForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('check-button'), () => checkCode($('check-code').value))();
  });
  const verifyForm = $('verify-form');
  verifyForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy($('verify-button'), () => verifyPayload($('verify-payload').value))();
  });
  if (canScan()) {
    $('verify-scan').hidden = false;
    $('verify-image-label').hidden = false;
    $('verify-scan').addEventListener('click', () => busy($('verify-scan'), scanCamera)());
    $('verify-image').addEventListener('change', (ev) => scanImage(ev.target.files?.[0]));
  } else {
    $('verify-no-scan').hidden = false;
  }
  if (location.hash === '#verify') {
    $('check-panel').scrollIntoView({ block: 'start' });
    $('verify-payload').focus();
  }
  loadRequests();
  loadReviews();
  setInterval(() => {
    if (document.visibilityState === 'visible') loadReviews();
  }, REVIEWS_MS);

  let timer = null;
  const schedule = () => {
    clearInterval(timer);
    timer = setInterval(() => {
      if (document.visibilityState === 'visible') refreshAll();
    }, REFRESH_MS);
  };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') refreshAll();
  });
  setInterval(renderCluster, 1000); // "synced N s ago"

  const fromHash = new URLSearchParams(location.hash.slice(1)).get('search');
  refreshAll().then(() => {
    document.body.dataset.ready = 'true';
    if (fromHash) {
      $('search-id').value = fromHash;
      search(fromHash, { pushHash: false });
    }
  });
  schedule();
}

start();
