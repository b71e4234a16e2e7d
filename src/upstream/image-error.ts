/** The caller sent source bytes that are not a decodable image: the gateway answers 400. */
export class InvalidImageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidImageError';
  }
}
