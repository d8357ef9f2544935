/** MIME renderer for `application/vnd.forkagent.notification+json`. */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { renderDigest } from './digest';
import { renderNotification } from './notification';
import { DIGEST_MIME, NOTIFICATION_MIME, parseDigest, parseTaskSnapshot } from './protocol';

export class NotificationRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private readonly mimeType: string) {
    super();
    this.addClass('jp-forkagent-notification-output');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const note = parseTaskSnapshot(model.data[this.mimeType]);
    this.node.replaceChildren(renderNotification(this.node.ownerDocument, note));
    return Promise.resolve();
  }
}

export class DigestRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private readonly mimeType: string) {
    super();
    this.addClass('jp-forkagent-digest-output');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const digest = parseDigest(model.data[this.mimeType]);
    this.node.replaceChildren(renderDigest(this.node.ownerDocument, digest));
    return Promise.resolve();
  }
}

export const digestRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [DIGEST_MIME],
  createRenderer: options => new DigestRenderer(options.mimeType)
};

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [NOTIFICATION_MIME],
  createRenderer: options => new NotificationRenderer(options.mimeType)
};

const extensions: IRenderMime.IExtension[] = [
  { id: 'forkagent-jupyter:notification', rendererFactory, rank: 0, dataType: 'json' },
  {
    id: 'forkagent-jupyter:digest',
    rendererFactory: digestRendererFactory,
    rank: 0,
    dataType: 'json'
  }
];

export default extensions;
