/** MIME renderer for `application/vnd.forkagent.notification+json`. */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { parseNotification, renderNotification } from './notification';
import { NOTIFICATION_MIME } from './protocol';

export class NotificationRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private readonly mimeType: string) {
    super();
    this.addClass('jp-forkagent-notification-output');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const note = parseNotification(model.data[this.mimeType]);
    this.node.replaceChildren(renderNotification(this.node.ownerDocument, note));
    return Promise.resolve();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [NOTIFICATION_MIME],
  createRenderer: options => new NotificationRenderer(options.mimeType)
};

const extension: IRenderMime.IExtension = {
  id: 'forkagent-jupyter:notification',
  rendererFactory,
  rank: 0,
  dataType: 'json'
};

export default extension;
